"""Decoding the protocol's event logs straight from their ABI with eth_abi.

Every worker decodes every event of the network (a few dozen per round and trainer), and
web3's ``process_log`` reaches the same values through generic normalisers, at several
times the cost. The values are web3's: integers, booleans, ``bytes`` for fixed and
dynamic byte strings, tuples for arrays, checksummed addresses. Logs come from the
node, so a log that does not fit its event's ABI raises :class:`ChainError` instead of
being guessed at.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from eth_abi import decode
from eth_abi.exceptions import DecodingError
from web3 import Web3

from mcfl_chain.chain.errors import ChainError


class EventDecoder:
    """Decoder of one event's logs (its topic 0 already matched).

    Parameters
    ----------
    abi
        The event's ABI entry (``type == "event"``).
    """

    def __init__(self, abi: Mapping[str, Any]) -> None:
        self.name = str(abi["name"])
        inputs = list(abi["inputs"])
        for item in inputs:
            if item["indexed"] and (item["type"] in ("bytes", "string") or "[" in item["type"]):
                # An indexed dynamic value is logged as its hash: nothing to decode.
                raise ValueError(f"{self.name}.{item['name']}: indexed dynamic types unsupported")
        self._order = [(item["name"], _normaliser(item["type"])) for item in inputs]
        self._indexed = [(item["name"], item["type"]) for item in inputs if item["indexed"]]
        self._data_names = [item["name"] for item in inputs if not item["indexed"]]
        self._data_types = [item["type"] for item in inputs if not item["indexed"]]

    def args(self, topics: Sequence[bytes], data: bytes) -> dict[str, Any]:
        """The event's arguments, in ABI order, from a log's topics (topic 0 included)
        and data."""
        if len(topics) != len(self._indexed) + 1:
            raise ChainError(
                f"a {self.name} log has {len(topics) - 1} indexed values, its ABI "
                f"{len(self._indexed)}: the contract is not the deployment's"
            )
        try:
            values = {
                name: decode([kind], bytes(topic))[0]
                for (name, kind), topic in zip(self._indexed, topics[1:], strict=True)
            }
            values.update(zip(self._data_names, decode(self._data_types, bytes(data)), strict=True))
        except DecodingError as exc:
            raise ChainError(f"a {self.name} log does not decode: {exc}") from exc
        return {name: normal(values[name]) for name, normal in self._order}


def _normaliser(kind: str) -> Callable[[Any], Any]:
    """web3's form of a decoded ``kind`` value, worked out once per ABI input."""
    if kind.endswith("]"):
        inner = _normaliser(kind[: kind.rindex("[")])
        return lambda value: tuple(inner(v) for v in value)
    if kind == "address":
        return Web3.to_checksum_address  # eth_abi gives addresses in lower case
    return lambda value: value
