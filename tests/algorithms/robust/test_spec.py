"""Defences named in text: selection rules by registry name, aggregation rules refused
until the protocol's model id commits to them."""

from __future__ import annotations

import pytest

from mcfl_chain.algorithms.robust import (
    SELECTION_RULES,
    DefenceNeedsProtocolSupport,
    KrumSelection,
    MultiKrumSelection,
    SelectionRule,
    defence_names,
    parse_defence,
)


def test_a_selection_rule_is_built_with_its_typed_options() -> None:
    # Execute
    multi = parse_defence("multi-krum:f=2:m=3")
    krum = parse_defence("krum")

    # Assert
    assert isinstance(multi, MultiKrumSelection) and (multi.f, multi.m) == (2, 3)
    assert isinstance(krum, KrumSelection) and krum.f == 1
    assert defence_names() == ["krum", "multi-krum"]


@pytest.mark.parametrize("name", ["median", "trimmed-mean:beta=0.2", "norm-clipping"])
def test_an_aggregation_rule_needs_protocol_support_not_yet_deployed(name: str) -> None:
    with pytest.raises(DefenceNeedsProtocolSupport, match="protocol support not yet deployed"):
        parse_defence(name)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fedavg", "the network's own aggregation"),
        ("bulyan", "unknown 'bulyan'; available now: krum, multi-krum"),
        ("krum:2", "'2' is not KEY=VALUE"),
        ("krum:g=2", "unknown options \\['g'\\]"),
        ("multi-krum:m=0", "m >= 1"),
    ],
)
def test_what_no_defence_accepts_is_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_defence(text)


def test_a_newly_registered_selection_rule_is_selectable_by_name(monkeypatch) -> None:
    # Prepare: a rule registered by a module of its own, nothing else edited.
    class KeepOwn(SelectionRule):
        def __init__(self, strict: bool = False) -> None:
            self.strict = strict

        def select(self, own, vectors, parent=None):  # type: ignore[no-untyped-def]
            return [own]

    monkeypatch.setitem(SELECTION_RULES, "keep-own", KeepOwn)

    # Execute
    rule = parse_defence("keep-own:strict=true")

    # Assert
    assert isinstance(rule, KeepOwn) and rule.strict is True
    assert "keep-own" in defence_names()
