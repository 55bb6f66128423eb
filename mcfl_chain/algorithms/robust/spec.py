"""Defences named in text, as a trainer selects one: ``NAME[:KEY=VALUE[:KEY=VALUE...]]``.

``parse_defence("multi-krum:f=1:m=3")`` builds the registered selection rule of that name
with those options (values read as ``true``/``false``, an integer, a float, or else kept
as text; the rule's constructor checks them). Any rule registered with
:func:`~.base.register_selection_rule` is selectable by its name, with nothing to edit
here.

Only **selection rules** can be used on the deployed network: they choose update ids and
the model stays the FedAvg of those ids, so its id, ``keccak256(abi.encode(parent,
sortedUpdateIds))``, still says how anyone recomputes it. An **aggregation rule**
(median, trimmed mean, norm clipping) computes other weights from the same ids; its
model id must also commit to the rule's code and parameter word, which the deployed
contracts do not hash yet, so naming one is refused with that reason
(:class:`DefenceNeedsProtocolSupport`).
"""

from __future__ import annotations

from collections.abc import Sequence

from mcfl_chain.algorithms.robust.base import (
    AGGREGATION_RULES,
    SELECTION_RULES,
    SelectionRule,
    make_selection_rule,
)

Value = bool | int | float | str


class DefenceNeedsProtocolSupport(ValueError):
    """The defence named is an aggregation rule: its model ids need a protocol change."""


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
    """The defences a trainer can select today: every registered selection rule."""
    return sorted(SELECTION_RULES)


def parse_defence(text: str) -> SelectionRule:
    """The selection rule ``NAME[:KEY=VALUE...]`` names, e.g. ``"krum:f=2"``.

    Raises
    ------
    DefenceNeedsProtocolSupport
        If the name is an aggregation rule (median, trimmed-mean, norm-clipping): its
        model ids must commit to the rule, which the deployed contracts do not do yet.
    ValueError
        If the name is unknown, a field is not ``KEY=VALUE``, or the rule refuses an
        option or a value.
    """
    name, *fields = text.split(":")
    name = name.strip()
    options = parse_key_values(fields, repr(text))
    if name in SELECTION_RULES:
        return make_selection_rule(name, **options)
    available = ", ".join(defence_names())
    if name in AGGREGATION_RULES:
        rule = AGGREGATION_RULES[name]
        if rule.code == 0:
            raise ValueError(
                f"{name!r} is the network's own aggregation (FedAvg of the kept "
                f"updates): leave the defence unset, or choose one of {available}"
            )
        raise DefenceNeedsProtocolSupport(
            f"{name!r} is an aggregation rule (code {rule.code}): its weights are "
            f"not the FedAvg of the kept updates, so the model id must commit to the rule, "
            f"which needs protocol support not yet deployed (the contracts hash only the "
            f"parents and the update ids); defences available now: {available}"
        )
    raise ValueError(
        f"unknown {name!r}; available now: {available} "
        f"(aggregation rules needing protocol support not yet deployed: "
        f"{', '.join(sorted(n for n, r in AGGREGATION_RULES.items() if r.code != 0))})"
    )
