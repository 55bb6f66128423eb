"""The options the campaign scripts share (``mcfl_chain/cli/_campaign_options.py``)."""

from __future__ import annotations

import click
import pytest

from mcfl_chain.cli._campaign_options import parse_option


def test_parse_option_reads_values_as_the_declaration_toml_would() -> None:
    assert parse_option("plus_chance=on") == ("plus_chance", "on")  # a bare word stays text
    assert parse_option("plus-keep-margin=0.1") == ("plus_keep_margin", 0.1)
    assert parse_option(" clusters = 3 ") == ("clusters", 3)
    assert parse_option('plus_robust="median"') == ("plus_robust", "median")


@pytest.mark.parametrize("text", ["plus_chance", "=on", "plus_chance=", " = "])
def test_parse_option_refuses_what_is_not_name_equals_value(text: str) -> None:
    with pytest.raises(click.BadParameter, match="NAME=VALUE"):
        parse_option(text)
