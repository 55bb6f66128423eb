"""What a worker keeps on disk so that a restart resumes where it stopped.

The chain is the source of truth; this is a cache of it. Before every transaction the
worker asks the chain what was already done (proposals, aggregations, votes). The
state file keeps what the chain cannot tell: the last block processed, the models
chosen for a round (so a restart trains the same ones), the CIDs already uploaded (so a
restart does not train again), and the rounds whose metrics were already written.

Events already processed are appended to ``events.jsonl``; a restart replays the ones
up to ``last_block`` and follows the chain from there instead of re-reading it all.
The state counts the events it recorded, so a log cut short or lost is noticed: the
worker then reads the chain again from the deployment block. A file that cannot be
read is never deleted: it is renamed ``<name>.damaged-<time>`` and the worker starts
over from the chain.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mcfl_chain.dag.events import record_line

log = logging.getLogger("mcfl_chain.worker")


class StateError(RuntimeError):
    """The state directory cannot be used."""


def aside_name(path: Path, tag: str) -> Path:
    """A free name ``<name>.<tag>-<time>`` (``-2``, ``-3``... appended if taken) beside
    ``path``, for a file set aside."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    target = path.with_name(f"{path.name}.{tag}-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{tag}-{stamp}-{n}")
    return target


def set_aside(path: Path) -> Path | None:
    """Rename ``path`` to ``<name>.damaged-<time>`` (never overwriting); None if absent."""
    if not path.exists():
        return None
    target = aside_name(path, "damaged")
    try:
        path.replace(target)
    except OSError as exc:
        raise StateError(
            f"cannot set {path} aside ({exc.strerror or exc}); move it away by hand"
        ) from exc
    return target


LOCK_NAME = "worker.lock"
"""The file a worker holds locked (``flock``) in its state directory while it runs."""

_LOCKS: dict[Path, int] = {}
"""State directories this process holds → the open lock file (held until it exits)."""


def _make_dir(state_dir: Path) -> None:
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateError(
            f"cannot create the state directory {state_dir} ({exc.strerror or exc}); "
            f"choose another --state-dir"
        ) from exc


def lock_state_dir(state_dir: Path) -> None:
    """Hold ``state_dir`` for this process until it exits, so that a second worker of
    the same trainer on this machine is refused instead of running beside the first.

    The lock is ``flock`` on ``worker.lock``, which holds the PID of its holder; the
    system releases it when the process ends, however it ends. Taking it again in the
    process that holds it does nothing.

    Raises
    ------
    StateError
        When another process holds it (one line naming its PID), or the directory
        cannot be created.
    """
    state_dir = Path(state_dir)
    _make_dir(state_dir)
    key = state_dir.resolve()
    if key in _LOCKS:
        return
    path = state_dir / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateError(
            f"cannot open {path} ({exc.strerror or exc}); choose another --state-dir"
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            os.close(fd)  # a file system without locks: run unguarded, as before
            log.warning("cannot lock %s (%s); not guarded against a second worker", path, exc)
            return
        holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "not known yet"
        os.close(fd)
        raise StateError(
            f"another worker (PID {holder}) is running with the state directory {state_dir}: "
            f"one trainer runs one worker; stop that one first, or give this one another "
            f"--state-dir if it is a different trainer"
        ) from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError as exc:  # the lock holds all the same; only its PID is not shown
        log.warning("cannot write this worker's PID into %s (%s)", path, exc.strerror or exc)
    _LOCKS[key] = fd


_TEMP = re.compile(r"\.state\.json\.(\d+)\.tmp")
"""Name of the file a save writes before renaming it: ``.state.json.<pid>.tmp``."""


def _pid_running(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user's counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temp_files(state_dir: Path) -> None:
    """Delete the temp files that saves of processes since ended left (a crash mid-save).

    They hold a state never renamed into place, so nothing is lost; a file of a running
    process (this one included, which is not saving now) is left alone.
    """
    for path in state_dir.glob(".state.json.*.tmp"):
        match = _TEMP.fullmatch(path.name)
        if match is None:
            continue
        pid = int(match.group(1))
        if pid != os.getpid() and _pid_running(pid):
            continue
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("cannot remove %s, left by a crash (%s)", path, exc.strerror or exc)


_TYPES: dict[str, tuple[type, ...]] = {
    "address": (str,),
    "deployment_block": (int,),
    "last_block": (int,),
    "first_round": (int, type(None)),
    "chosen": (dict,),
    "uploaded": (dict,),
    "reported": (list,),
    "events_recorded": (int, type(None)),
    "deployment_block_hash": (str,),
}
_REQUIRED = ("address", "deployment_block", "last_block")


def _is_model_id(value: object) -> bool:
    """Whether ``value`` is a model id as saved: 32 bytes in hex."""
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:
        bytes.fromhex(value)
    except ValueError:
        return False
    return True


@dataclass
class WorkerState:
    """Persistent position of one trainer. Written atomically after every change."""

    path: Path
    address: str = ""
    deployment_block: int = 0
    last_block: int = -1
    first_round: int | None = None
    """The first round this trainer saw open, if it was a member of that phase's quorum
    (``--rounds`` counts from its first proposal on chain, and from here only when it
    has none; a trainer out of the quorum then counts from its admission)."""
    chosen: dict[str, list[str]] = field(default_factory=dict)
    """round → hex ids of the models chosen for training in that round."""
    uploaded: dict[str, str] = field(default_factory=dict)
    """"round:parent" → CID of the trained update already stored."""
    reported: list[int] = field(default_factory=list)
    """Rounds whose metrics line was written."""
    events_recorded: int | None = None
    """Events in ``events.jsonl`` up to ``last_block`` (None: a file from before it was
    counted)."""
    deployment_block_hash: str = ""
    """Hash of the deployment block on the chain this state follows: a devnet started
    again deploys at the same block and addresses, but its blocks differ."""

    @classmethod
    def fresh(cls, state_dir: Path, address: str, deployment_block: int) -> WorkerState:
        """A new state that reads the chain from the deployment block."""
        state = cls(
            path=state_dir / "state.json",
            address=address,
            deployment_block=deployment_block,
            last_block=deployment_block - 1,
            events_recorded=0,
        )
        state.save()
        return state

    @classmethod
    def open(cls, state_dir: Path, address: str, deployment_block: int) -> WorkerState:
        """Load the state of ``address`` for one deployment, or start a fresh one.

        A state file that cannot be read (half written, empty, not a state) or that was
        written for another deployment is set aside and a fresh state is returned: the
        chain tells again what it held. Only a state of another trainer is refused,
        since that directory is in use by someone else.

        Raises
        ------
        StateError
            When the directory cannot be created or read, or belongs to another trainer.
        """
        state_dir = Path(state_dir)
        path = state_dir / "state.json"
        _make_dir(state_dir)
        remove_stale_temp_files(state_dir)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return cls.fresh(state_dir, address, deployment_block)
        except OSError as exc:
            raise StateError(
                f"cannot use the state directory {state_dir} ({exc.strerror or exc}); "
                f"choose another --state-dir"
            ) from exc
        try:
            raw = cls._parse(data)
        except ValueError as exc:
            return cls._start_over(state_dir, address, deployment_block, f"{path} is {exc}")
        if raw["address"].lower() != address.lower():
            raise StateError(
                f"{path} belongs to trainer {raw['address']}, not to {address}; "
                f"use another --state-dir"
            )
        if raw["deployment_block"] != deployment_block:
            return cls._start_over(
                state_dir,
                address,
                deployment_block,
                f"{path} follows the deployment made at block {raw['deployment_block']}, "
                f"not the one at block {deployment_block}",
            )
        return cls(path=path, **raw)

    @staticmethod
    def _parse(data: bytes) -> dict[str, Any]:
        """The fields of a state file; ValueError says what is wrong with it."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"not text (byte {exc.start} is not UTF-8)") from None
        if not text.strip():
            raise ValueError("empty")
        try:
            raw = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"not valid JSON ({exc})") from exc
        if not isinstance(raw, dict):
            raise ValueError("not a state file (not a JSON object)")
        missing = [k for k in _REQUIRED if k not in raw]
        if missing:
            raise ValueError(f"not a state file (no {', '.join(missing)})")
        known = {f.name for f in fields(WorkerState)} - {"path"}
        raw = {k: v for k, v in raw.items() if k in known}
        wrong = [k for k, v in raw.items() if not isinstance(v, _TYPES[k])]
        if wrong:
            raise ValueError(f"not a state file (bad {', '.join(wrong)})")
        for round_, ids in raw.get("chosen", {}).items():
            if not isinstance(ids, list) or not all(_is_model_id(i) for i in ids):
                raise ValueError(f"not a state file (bad model ids chosen in round {round_})")
        if not all(isinstance(c, str) for c in raw.get("uploaded", {}).values()):
            raise ValueError("not a state file (bad uploaded)")
        return raw

    @classmethod
    def _start_over(
        cls, state_dir: Path, address: str, deployment_block: int, reason: str
    ) -> WorkerState:
        kept = [p for p in (state_dir / "state.json", state_dir / "events.jsonl") if p.exists()]
        moved = [set_aside(p) for p in kept]
        log.warning(
            "%s; set aside as %s; starting over from the chain (block %d, the deployment)",
            reason,
            ", ".join(p.name for p in moved if p is not None),
            deployment_block,
        )
        return cls.fresh(state_dir, address, deployment_block)

    def start_over(self, reason: str) -> WorkerState:
        """Set this state and its events log aside; a fresh state of the same trainer."""
        return self._start_over(self.path.parent, self.address, self.deployment_block, reason)

    def save(self) -> None:
        data = asdict(self)
        data.pop("path")
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(tmp, "w") as f:
                json.dump(data, f, indent=1)
                f.flush()
                os.fsync(f.fileno())
            tmp.replace(self.path)
        except OSError as exc:
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)  # a half-written file is no use to anyone
            raise StateError(
                f"cannot write {self.path} ({exc.strerror or exc}); free some space or "
                f"choose another --state-dir"
            ) from exc

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
            try:
                with open(self.events_path, "a") as f:
                    f.write("".join(record_line(event) + "\n" for event in events))
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                raise StateError(
                    f"cannot write {self.events_path} ({exc.strerror or exc}); free some "
                    f"space or choose another --state-dir"
                ) from exc
        if head > self.last_block:
            self.last_block = head
            if self.events_recorded is not None:
                self.events_recorded += len(events)
            self.save()

    def rewind(self, reason: str) -> None:
        """Forget the events log (set aside) and read the chain again from the deployment."""
        moved = set_aside(self.events_path)
        log.warning(
            "%s; %sreading the chain again from block %d (the deployment)",
            reason,
            f"set it aside as {moved.name}; " if moved else "",
            self.deployment_block,
        )
        self.last_block = self.deployment_block - 1
        self.events_recorded = 0
        self.save()

    def replay(self) -> list[dict[str, Any]]:
        """Events already processed (up to ``last_block``), in chain order.

        The log is rewritten with just those, so a line torn by a crash never sits
        in front of the events appended after the restart. When the log holds fewer or
        more of them than were recorded (cut short, lost, altered), it is not trusted:
        :meth:`rewind` sets it aside and nothing is replayed.
        """
        try:
            lines = self.events_path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        except UnicodeDecodeError as exc:
            self.rewind(f"{self.events_path} is not text (byte {exc.start} is not UTF-8)")
            return []
        except OSError as exc:
            raise StateError(
                f"cannot read {self.events_path} ({exc.strerror or exc}); choose another "
                f"--state-dir"
            ) from exc
        events = []
        for line in lines:
            try:
                event = json.loads(line)
                block = event["block"]
            except (ValueError, TypeError, KeyError):
                break  # a line torn by a crash: everything after it comes again from the chain
            if not isinstance(block, int):
                break
            if block <= self.last_block:
                events.append(event)
        if self.events_recorded is not None and len(events) != self.events_recorded:
            self.rewind(
                f"{self.events_path} holds {len(events)} events up to block "
                f"{self.last_block}, {self.events_recorded} were recorded: it was cut short, "
                f"lost or altered"
            )
            return []
        tmp = self.events_path.with_suffix(".tmp")
        try:
            tmp.write_text("".join(json.dumps(e) + "\n" for e in events))
            tmp.replace(self.events_path)
        except OSError as exc:
            raise StateError(
                f"cannot write {self.events_path} ({exc.strerror or exc}); free some space "
                f"or choose another --state-dir"
            ) from exc
        return events
