"""The defence registries: stable names and codes, and clear errors."""

from __future__ import annotations

import pytest
import torch

from mcfl_chain.algorithms.fedavg import fedavg
from mcfl_chain.algorithms.robust import (
    AGGREGATION_CODES,
    AGGREGATION_RULES,
    SELECTION_RULES,
    AggregationRule,
    make_aggregation_rule,
    register_aggregation_rule,
    rule_from_chain,
)


def test_codes_and_names_are_the_documented_ones() -> None:
    # A code names one rule forever: model ids on chain commit to it.
    assert {code: rule.name for code, rule in AGGREGATION_CODES.items()} == {
        0: "fedavg",
        1: "median",
        2: "trimmed-mean",
        3: "norm-clipping",
        4: "per-head-fedavg",
    }
    assert set(AGGREGATION_RULES) == {
        "fedavg",
        "median",
        "trimmed-mean",
        "norm-clipping",
        "per-head-fedavg",
    }
    assert set(SELECTION_RULES) == {"krum", "multi-krum"}


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("fedavg", {}),
        ("median", {}),
        ("trimmed-mean", {"beta": 0.3}),
        ("norm-clipping", {}),
        ("per-head-fedavg", {}),
    ],
)
def test_every_rule_is_rebuilt_from_its_code_and_parameter(name: str, options: dict) -> None:
    # Prepare
    rule = make_aggregation_rule(name, **options)

    # Execute
    rebuilt = rule_from_chain(rule.code, rule.parameter)

    # Assert
    assert type(rebuilt) is type(rule) and rebuilt.parameter == rule.parameter


def test_rule_zero_is_fedavg() -> None:
    updates = [(2, 3, {"w": torch.tensor([1.0])}), (1, 1, {"w": torch.tensor([5.0])})]
    assert torch.equal(rule_from_chain(0).aggregate(updates)["w"], fedavg(updates)["w"])


def test_a_taken_code_or_name_is_refused() -> None:
    # Prepare
    class Other(AggregationRule):
        def aggregate(self, updates, parent=None):  # type: ignore[no-untyped-def]
            return {}

    # Execute / Assert: the registries are left as they were.
    with pytest.raises(ValueError, match="code 1 is already 'median'"):
        register_aggregation_rule("other", code=1)(Other)
    with pytest.raises(ValueError, match="'median' is registered twice"):
        register_aggregation_rule("median", code=200)(Other)
    assert "other" not in AGGREGATION_RULES and 200 not in AGGREGATION_CODES


def test_unknown_codes_names_options_and_words_are_refused() -> None:
    with pytest.raises(ValueError, match=r"unknown aggregation rule code 9; known: 0 \(fedavg\)"):
        rule_from_chain(9)
    with pytest.raises(ValueError, match="median' has no parameter"):
        rule_from_chain(1, 7)
    with pytest.raises(ValueError, match="unknown aggregation rule 'mean'"):
        make_aggregation_rule("mean")
    with pytest.raises(ValueError, match=r"unknown options \['bound'\]"):
        make_aggregation_rule("median", bound=1.0)
