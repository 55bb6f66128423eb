"""Phase deadlines as one trainer keeps them (PROTOCOL §4, "Deadlines").

Past a phase's deadline any trainer may end it with an empty call. So that one
transaction ends it instead of a burst of them of which all but one revert, the voters
of the phase take turns by trainer id: rank 0 ends it ``grace`` seconds after it saw the
deadline past, rank k ``k × stagger`` seconds later still, each only if the phase is
still open then. While a trainer waits, it says now and then whom it waits for.

The trainer decides *whether* it waits or acts; this service only knows when its turn
to end a phase comes, ends it, and says why it is waiting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet

from mcfl_chain.chain.client import ChainClient, ChainError, Phase, TrainerStatus
from mcfl_chain.chain.deployment import ALL_TRAINERS_BPS
from mcfl_chain.dag.cohort import cohort_of
from mcfl_chain.dag.graph import ModelDAG
from mcfl_chain.dag.quorum import phase_members, voters_in
from mcfl_chain.worker.timing import RoundClock

log = logging.getLogger("mcfl_chain.worker")

HAMMER_PAUSE = 1.0
"""Seconds between two attempts of one trainer to end a phase: the node is not hammered."""


class Deadlines:
    """When this trainer may end a phase whose deadline passed, ending it, and the log
    lines of a trainer that waits.

    Parameters
    ----------
    chain, dag, clock
        The trainer's chain client, its DAG (whose votes tell the turn) and its round
        clock (time spent here counts as ``chain``).
    sync
        Brings ``dag`` up to the chain's head.
    grace, stagger
        :attr:`~mcfl_chain.worker.rounds.WorkerOptions.advance_grace` and
        ``advance_stagger``.
    wait_log_interval
        Seconds between two "waits for" lines in one phase (0: never).
    """

    def __init__(
        self,
        chain: ChainClient,
        dag: ModelDAG,
        clock: RoundClock,
        sync: Callable[[], None],
        *,
        grace: float,
        stagger: float,
        wait_log_interval: float,
    ) -> None:
        self.chain = chain
        self.dag = dag
        self.clock = clock
        self.sync = sync
        self.grace = grace
        self.stagger = stagger
        self.wait_log_interval = wait_log_interval
        self.trainer_id = 0
        """This trainer's id, set once it is known (its rank among the voters)."""
        self._next_try = 0.0
        self._turn: tuple[tuple[int, Phase], float] | None = None
        self._waiting: tuple[bool, int, Phase] | None = None
        self._waiting_since = 0.0
        self._next_wait_log = 0.0
        self._cohort: tuple[int, AbstractSet[int]] | None = None
        """The last round whose cohort was drawn, and its trainer ids."""

    def may_end(self, status: TrainerStatus, without_members: bool = False) -> bool:
        """Whether to try ending the current phase now: its deadline is past, or
        ``without_members`` (a cohort's phase whose members all voted, which a trainer
        sitting out may end), and no earlier try or turn says to wait."""
        now = time.time()
        return (
            status.started
            and now >= self._next_try
            and (now >= status.deadline or (without_members and status.votes >= status.quorum))
        )

    def end_phase(self, round_: int, phase: Phase) -> None:
        """End (round, phase) with an empty call if this trainer's turn came and the
        phase is still open; otherwise note when to try again."""
        due = self._turn_at(round_, phase)
        if time.time() < due:
            self._next_try = due
            return
        self._next_try = time.time() + HAMMER_PAUSE
        with self.clock.measure("chain"):
            status = self.chain.status()
            if (status.round, status.phase) != (round_, phase):
                return
            missing = status.quorum - status.votes
            try:
                self.chain.end_phase(phase)
                log.info(
                    "round %d: %s deadline passed; ended the phase without %d of its %d members",
                    round_,
                    phase.name.lower(),
                    missing,
                    status.quorum,
                )
            except ChainError as exc:
                # Another trainer ended it first: the next view shows the new phase.
                log.debug("ending the phase after its deadline refused: %s", exc)

    def draw(self) -> Callable[[int], AbstractSet[int]] | None:
        """In a cohort network, the trainer ids drawn for a round (as
        :func:`~mcfl_chain.dag.quorum.phase_members` takes them); None without cohorts."""
        if self.chain.cohort_bps() >= ALL_TRAINERS_BPS:
            return None
        return self._drawn

    def _drawn(self, round_: int) -> AbstractSet[int]:
        if self._cohort is None or self._cohort[0] != round_:
            ids = cohort_of(
                self.chain.cohort_seed(),
                round_,
                self.chain.cohort_bps(),
                self.chain.last_trainer_id(),
            )
            self._cohort = (round_, ids)
        return self._cohort[1]

    def members(self, round_: int, phase: Phase, quorum: int) -> set[int]:
        """The trainer ids whose votes count in (round, phase), from the synced DAG."""
        return phase_members(self.dag, round_, phase, quorum, drawn=self.draw())

    def _turn_at(self, round_: int, phase: Phase) -> float:
        """When this trainer's turn to end (round, phase) comes (fixed at the first ask)."""
        if self._turn is None or self._turn[0] != (round_, phase):
            with self.clock.measure("chain"):
                self.sync()
            voters = sorted(voters_in(self.dag, round_, phase))
            rank = voters.index(self.trainer_id) if self.trainer_id in voters else len(voters)
            self._turn = ((round_, phase), time.time() + self.grace + rank * self.stagger)
        return self._turn[1]

    def say_whom_it_waits_for(self, status: TrainerStatus) -> None:
        """Every ``wait_log_interval`` s of waiting in one phase, log for whom and how long."""
        now = time.monotonic()
        where = (status.started, status.round, status.phase)
        if where != self._waiting:
            self._waiting, self._waiting_since = where, now
            self._next_wait_log = now + self.wait_log_interval
            return
        if self.wait_log_interval <= 0 or now < self._next_wait_log:
            return
        self._next_wait_log = now + self.wait_log_interval
        waited = now - self._waiting_since
        with self.clock.measure("chain"):
            if not status.started:
                log.info(
                    "waited %.0f s for round 0 to open: %d of the %d trainers it needs "
                    "are registered",
                    waited,
                    self.chain.trainer_count(),
                    self.chain.deployment.min_trainers,
                )
                return
            self.sync()
        voted = voters_in(self.dag, status.round, status.phase)
        members = self.members(status.round, status.phase, status.quorum)
        missing = sorted(members - voted)
        if (left := status.deadline - time.time()) > 0:
            end = f"the phase deadline passes in {left:.0f} s, then the phase ends without them"
        else:
            end = f"the phase deadline passed {-left:.0f} s ago: ending the phase without them"
        log.info(
            "round %d %s: waited %.0f s for trainer(s) %s (%d of %d votes); %s",
            status.round,
            status.phase.name.lower(),
            waited,
            ", ".join(map(str, missing)) or "?",
            status.votes,
            status.quorum,
            end,
        )
