"""Stage `admit`: A_t <- update(A_{t-1}, p_t), the archive's admission policy and the islands' ring migration.

Admission is a policy (`AdmissionPolicy`), chosen by the run's `admission` option from `ADMISSIONS`:

    map_elites   the child takes its cell iff it beats the cell's occupant (MAP-Elites; `search.archive`)
    jp           the child takes its cell, displacing the occupant, iff the archive's J_p rises (Appendix C.5):
                 J_p(roster of A - occupant + child) > J_p(roster of A)

Only a child judged in full (validated on every row, within the cost limit) is offered; every
`migration_interval` iterations each island's best is offered to the next island. A policy reads the run's
state and places the child in its archive, and nothing else: no I/O, no RNG.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from coco_sql.engine.run_state import RunState
from coco_sql.errors import ConfigError
from coco_sql.evaluate import Outcome
from coco_sql.search import Elite
from coco_sql.search.roster import build_roster, jp_score
from coco_sql.store import ArchiveEntry


class AdmissionPolicy(Protocol):
    """Whether a child judged in full takes its cell of `island`'s archive in `state`."""

    name: str

    def admit(
        self, state: RunState, island: int, cell: str, elite: Elite, val: Outcome, *, iteration: int
    ) -> ArchiveEntry | None:
        """Place `elite` (whose validation outcome is `val`) in `cell` when the policy admits it; the landing to
        record, else None."""
        ...


class MapElitesAdmission:
    """The child takes its cell iff it beats the cell's occupant."""

    name = "map_elites"

    def admit(
        self, state: RunState, island: int, cell: str, elite: Elite, val: Outcome, *, iteration: int
    ) -> ArchiveEntry | None:
        return state.archive.try_admit(island, cell, elite, iteration=iteration, seq=0, reason="admitted")


class JpAdmission:
    """J_p as the population objective (Appendix C.5): the child takes its cell, displacing the occupant, iff
    the archive's J_p rises."""

    name = "jp"

    def admit(
        self, state: RunState, island: int, cell: str, elite: Elite, val: Outcome, *, iteration: int
    ) -> ArchiveEntry | None:
        child = state.row_scores(val, "val")
        occupant = state.archive.cells(island).get(cell)
        before = [state.val_rows[e] for e in state.elite_ids()]
        after = [state.val_rows[e] for e in state.elite_ids() if occupant is None or e != occupant.program_id]
        n = len(state.val_ids)
        if population_jp([*after, child], n) <= population_jp(before, n):
            return None
        state.archive.place(island, cell, elite)
        return ArchiveEntry(
            iteration=iteration,
            seq=0,
            island=island,
            cell=cell,
            program_id=elite.program_id,
            reason="admitted",
        )


ADMISSIONS: dict[str, type[AdmissionPolicy]] = {"map_elites": MapElitesAdmission, "jp": JpAdmission}


def make_admission(name: str) -> AdmissionPolicy:
    """The admission policy named `name`; a one-line ConfigError naming the known ones otherwise."""
    if name not in ADMISSIONS:
        raise ConfigError(f"unknown admission {name!r}: use one of {', '.join(ADMISSIONS)}")
    return ADMISSIONS[name]()


def population_jp(rows: list[np.ndarray], n: int) -> float:
    """J_p (p = 2) of the greedy roster of a population given its per-row validation scores."""
    if not rows:
        return 0.0
    return jp_score(build_roster(np.vstack(rows)).marginals, n)


@dataclass(frozen=True)
class Admit:
    """Stage `admit`: offer a child to its island's archive under `policy`, then migrate when it is time."""

    policy: AdmissionPolicy
    migration_interval: int

    def __call__(
        self, t: int, state: RunState, island: int, cell: str | None, elite: Elite | None, val: Outcome
    ) -> list[ArchiveEntry]:
        """The archive's landings at iteration t: the child's (when `elite` is given: a valid child judged in
        full, in `cell`), then the migrations (numbered after it)."""
        landings = []
        if cell is not None and elite is not None:
            entry = self.policy.admit(state, island, cell, elite, val, iteration=t)
            if entry is not None:
                landings.append(entry)
        if t % self.migration_interval == 0:
            landings.extend(state.archive.migrate(t, first_seq=len(landings)))
        return landings

    @staticmethod
    def seed(state: RunState, cell: str, elite: Elite, islands: int) -> tuple[ArchiveEntry, ...]:
        """A_0: the seed program in its cell of every island (it always lands: every archive is empty)."""
        landings = (
            state.archive.try_admit(island, cell, elite, iteration=0, seq=island, reason="seed")
            for island in range(islands)
        )
        return tuple(entry for entry in landings if entry is not None)
