"""Defences named in text: selection and aggregation rules by registry name."""

from __future__ import annotations

import pytest

from mcfl_chain.algorithms.robust import (
    SELECTION_RULES,
    AggregationRule,
    CoordinateMedian,
    KrumSelection,
    MultiKrumSelection,
    NormClipping,
    SelectionRule,
    TrimmedMean,
    defence_names,
    parse_defence,
    rule_from_chain,
)


def test_a_selection_rule_is_built_with_its_typed_options() -> None:
    # Execute
    multi = parse_defence("multi-krum:f=2:m=3")
    krum = parse_defence("krum")

    # Assert
    assert isinstance(multi, MultiKrumSelection) and (multi.f, multi.m) == (2, 3)
    assert isinstance(krum, KrumSelection) and krum.f == 1
    assert defence_names() == ["krum", "median", "multi-krum", "norm-clipping", "trimmed-mean"]


@pytest.mark.parametrize(
    ("text", "kind", "code", "parameter"),
    [
        ("median", CoordinateMedian, 1, 0),
        ("trimmed-mean:beta=0.2", TrimmedMean, 2, 2000),
        ("norm-clipping", NormClipping, 3, 0),
        ("norm-clipping:bound=1.5", NormClipping, 3, 0x3FF8000000000000),
    ],
)
def test_an_aggregation_rule_is_a_defence_with_its_chain_code(
    text: str, kind: type[AggregationRule], code: int, parameter: int
) -> None:
    # Execute
    rule = parse_defence(text)

    # Assert: the (code, word) the chain records rebuilds the same rule
    assert isinstance(rule, kind) and (rule.code, rule.parameter) == (code, parameter)
    again = rule_from_chain(rule.code, rule.parameter)
    assert type(again) is kind and again.parameter == parameter


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("fedavg", "no defence but a network's own aggregation \\(rule code 0\\)"),
        ("per-head-fedavg", "no defence but a network's own aggregation \\(rule code 4\\)"),
        ("bulyan", "unknown 'bulyan'; available: krum, median, multi-krum, norm-clipping"),
        ("trimmed-mean:beta=0.6", "beta"),
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
