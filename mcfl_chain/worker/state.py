"""What a worker keeps on disk so that a restart resumes where it stopped.

The chain is the source of truth for what was *done* (proposals, aggregations,
votes): before every transaction the worker asks the chain. The state file keeps what
the chain cannot tell: the last block processed, the models chosen for a round (so a
restart trains the same ones), the CIDs already uploaded (so a restart does not train
again), and the rounds whose metrics were already written.

Events already processed are appended to ``events.jsonl``; a restart replays the ones
up to ``last_block`` and follows the chain from there instead of re-reading it all.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


class StateError(RuntimeError):
    """The state directory cannot be used."""


@dataclass
class WorkerState:
    """Persistent position of one trainer. Written atomically after every change."""

    path: Path
    address: str = ""
    deployment_block: int = 0
    last_block: int = -1
    first_round: int | None = None
    """The first round this trainer took part in: ``--rounds`` counts from there."""
    chosen: dict[str, list[str]] = field(default_factory=dict)
    """round → hex ids of the models chosen for training in that round."""
    uploaded: dict[str, str] = field(default_factory=dict)
    """"round:parent" → CID of the trained update already stored."""
    reported: list[int] = field(default_factory=list)
    """Rounds whose metrics line was written."""

    @classmethod
    def open(cls, state_dir: Path, address: str, deployment_block: int) -> WorkerState:
        """Load the state of ``address`` for one deployment, or start a fresh one.

        A state directory belongs to one account and one deployment: reusing it for
        another would skip work that was never done, so that is refused.
        """
        path = state_dir / "state.json"
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
        except FileNotFoundError:
            state = cls(
                path=path,
                address=address,
                deployment_block=deployment_block,
                last_block=deployment_block - 1,
            )
            state.save()
            return state
        except ValueError as exc:
            raise StateError(
                f"{path} is not valid JSON ({exc}); move it away to start over"
            ) from exc
        if (
            raw.get("address", "").lower() != address.lower()
            or raw.get("deployment_block") != deployment_block
        ):
            raise StateError(
                f"{path} belongs to trainer {raw.get('address')} on the deployment made at "
                f"block {raw.get('deployment_block')}, not to {address} at block "
                f"{deployment_block}; use another --state-dir"
            )
        raw.pop("path", None)
        return cls(path=path, **raw)

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = asdict(self)
        data.pop("path")
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)

    # -- small typed accessors -------------------------------------------------------

    def chosen_for(self, round_: int) -> list[bytes] | None:
        ids = self.chosen.get(str(round_))
        return None if ids is None else [bytes.fromhex(i) for i in ids]

    def set_chosen(self, round_: int, model_ids: list[bytes]) -> None:
        self.chosen[str(round_)] = [m.hex() for m in model_ids]
        self.save()

    def uploaded_cid(self, round_: int, parent: bytes) -> str | None:
        return self.uploaded.get(f"{round_}:{parent.hex()}")

    def set_uploaded(self, round_: int, parent: bytes, cid: str) -> None:
        self.uploaded[f"{round_}:{parent.hex()}"] = cid
        self.save()

    def mark_reported(self, round_: int) -> None:
        self.reported.append(round_)
        self.save()

    @property
    def events_path(self) -> Path:
        return self.path.with_name("events.jsonl")

    def record(self, events: list[dict[str, Any]], head: int) -> None:
        """Append processed events, then move ``last_block`` to ``head``.

        Written in that order: a crash in between leaves events past ``last_block``,
        which :meth:`replay` ignores and the chain delivers again.
        """
        if events:
            with open(self.events_path, "a") as f:
                for event in events:
                    f.write(json.dumps(event) + "\n")
                f.flush()
                os.fsync(f.fileno())
        if head > self.last_block:
            self.last_block = head
            self.save()

    def replay(self) -> list[dict[str, Any]]:
        """Events already processed (up to ``last_block``), in chain order.

        The log is rewritten with just those, so a line torn by a crash never sits
        in front of the events appended after the restart.
        """
        try:
            lines = self.events_path.read_text().splitlines()
        except FileNotFoundError:
            return []
        events = []
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                break  # a line torn by a crash: everything after it comes again from the chain
            if event["block"] <= self.last_block:
                events.append(event)
        tmp = self.events_path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(e) + "\n" for e in events))
        tmp.replace(self.events_path)
        return events
