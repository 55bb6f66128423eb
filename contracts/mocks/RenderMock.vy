# pragma version 0.4.3
"""
@title Test mock exposing the metadata rendering helpers
@license MIT
@notice Lets tests compare `modules/render.vy` with Python's multiformats and
        hex rendering on arbitrary inputs. Not deployed on networks.
"""

from ..modules import render


@external
@pure
def hex32(x: bytes32) -> String[66]:
    """
    @notice `render._hex32`.
    @param x A 32-byte value.
    @return "0x" and 64 hex digits.
    """
    return render._hex32(x)


@external
@pure
def hexAddress(x: address) -> String[42]:
    """
    @notice `render._hex_address`.
    @param x An address.
    @return "0x" and 40 lower-case hex digits.
    """
    return render._hex_address(x)


@external
@pure
def cid(dagPb: bool, digest: bytes32) -> String[59]:
    """
    @notice `render._cid` for the raw or dag-pb codec.
    @param dagPb True for dag-pb, False for raw.
    @param digest The sha2-256 digest.
    @return The CIDv1 in multibase base32.
    """
    if dagPb:
        return render._cid(render.CODEC_DAG_PB, digest)
    return render._cid(render.CODEC_RAW, digest)


@external
@pure
def dataUrl(document: String[render.MAX_JSON]) -> String[render.MAX_URI]:
    """
    @notice `render._json_data_url`.
    @param document A JSON document (any text).
    @return The base64 data URL.
    """
    return render._json_data_url(document)
