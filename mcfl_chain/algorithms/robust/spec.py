"""Defences named in text, as a trainer selects one: ``NAME[:KEY=VALUE[:KEY=VALUE...]]``.

``parse_defence("multi-krum:f=1:m=3")`` builds the registered rule of that name with
those options (values read as ``true``/``false``, an integer, a float, or else kept as
text; the rule's constructor checks them). Any rule registered with
:func:`~.base.register_selection_rule` or :func:`~.base.register_aggregation_rule` is
selectable by its name, with nothing to edit here.

A defence is one of two kinds (:mod:`.base`):

- a **selection rule** (Krum, Multi-Krum) chooses update ids; the model stays the
  network's aggregate of those ids, rule 0 on chain;
- an **aggregation rule** (``median``, ``trimmed-mean:beta=0.2``, ``norm-clipping``)
  computes other weights from the ids; the trainer submits its code and parameter word
  with them and the model id commits to the rule, so anyone rebuilds the model.

FedAvg (the network's default) and a rule an architecture names (FACADE's
``per-head-fedavg``) are no defences (:attr:`~.base.AggregationRule.defence`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mcfl_chain.algorithms.robust.base import (
    AGGREGATION_RULES,
    SELECTION_RULES,
    AggregationRule,
    SelectionRule,
    make_aggregation_rule,
    make_selection_rule,
)

Value = bool | int | float | str
Defence = SelectionRule | AggregationRule


def _value(text: str) -> Value:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def parse_key_values(fields: Sequence[str], context: str) -> dict[str, Value]:
    """``KEY=VALUE`` fields as a dict, each value read as a bool, int, float or string.

    Shared by every ``NAME[:KEY=VALUE...]`` spec (defences, adversaries).

    Raises
    ------
    ValueError
        ``"<context>: '<field>' is not KEY=VALUE"`` for a field without a key and ``=``.
    """
    options: dict[str, Value] = {}
    for field in fields:
        key, equals, value = field.partition("=")
        if not equals or not key.strip():
            raise ValueError(f"{context}: {field!r} is not KEY=VALUE")
        options[key.strip()] = _value(value.strip())
    return options


def defence_names() -> list[str]:
    """The defences a trainer can select: every registered selection rule and every
    aggregation rule that is a defence (not FedAvg, not an architecture's own rule)."""
    aggregation = [name for name, rule in AGGREGATION_RULES.items() if rule.defence]
    return sorted([*SELECTION_RULES, *aggregation])


def parse_defence(text: str) -> Defence:
    """The defence ``NAME[:KEY=VALUE...]`` names, e.g. ``"krum:f=2"`` or
    ``"trimmed-mean:beta=0.2"``: a selection rule or an aggregation rule.

    Raises
    ------
    ValueError
        If the name is unknown or no defence (``fedavg``, ``per-head-fedavg``), a field
        is not ``KEY=VALUE``, or the rule refuses an option or a value.
    """
    name, *fields = text.split(":")
    name = name.strip()
    options = parse_key_values(fields, repr(text))
    if name in SELECTION_RULES:
        return make_selection_rule(name, **options)
    available = ", ".join(defence_names())
    if name in AGGREGATION_RULES:
        rule = AGGREGATION_RULES[name]
        if rule.defence:
            return make_aggregation_rule(name, **options)
        raise ValueError(
            f"{name!r} is no defence but a network's own aggregation (rule code "
            f"{rule.code}): leave the defence unset, or choose one of {available}"
        )
    raise ValueError(f"unknown {name!r}; available: {available}")
