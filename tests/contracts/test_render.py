"""Property-based tests of the metadata rendering (modules/render.vy) against Python."""

import base64
import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from multiformats import CID, multihash

from .conftest import read_data_url

bytes32 = st.binary(min_size=32, max_size=32)


@pytest.fixture(scope="module")
def render(project, accounts):
    return project.RenderMock.deploy(sender=accounts[0])


@settings(max_examples=15)
@given(digest=bytes32, dag_pb=st.booleans(), address=st.binary(min_size=20, max_size=20))
def test_metadata_rendering_matches_python(render, digest, dag_pb, address):
    expected_cid = CID(
        "base32", 1, "dag-pb" if dag_pb else "raw", multihash.wrap(digest, "sha2-256")
    )
    assert render.cid(dag_pb, digest) == str(expected_cid)
    assert render.hex32(digest) == "0x" + digest.hex()
    assert render.hexAddress("0x" + address.hex()) == "0x" + address.hex()


printable = st.characters(min_codepoint=32, max_codepoint=126)


@settings(max_examples=25)
@given(document=st.text(printable, max_size=1200))
@example(document="")
@example(document="a")
@example(document="ab")
@example(document="x" * 1199)
@example(document="y" * 1200)
def test_data_url_is_standard_base64(render, document):
    expected = base64.b64encode(document.encode()).decode()
    assert render.dataUrl(document) == "data:application/json;base64," + expected


@settings(max_examples=15)
@given(text=st.text(printable, max_size=500))
def test_data_url_reads_back_with_a_standard_reader(render, text):
    assert read_data_url(render.dataUrl(json.dumps({"text": text}))) == {"text": text}
