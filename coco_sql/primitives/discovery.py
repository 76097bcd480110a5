"""A run's primitive state in the loop: the library, the trials, and discovery (PACE, "EAP Discovery").

Discovery runs once per generation (here: per iteration, the loop's unit of one child) and adds at most one
primitive:

1. extraction (E2) when the iteration's child is a new history best (its validation score beats every earlier
   program's; the seed counts, at iteration 0): a guard, CTE-free expression or helper function of that program
   becomes a primitive, "strictly without altering or re-evaluating the source program";
2. otherwise, every `generation_every` iterations, generation (E3; offline: `extraction.combine`) from the top-k
   primitives by posterior mean: the first pair, best first, that combines into something new.

The two never happen in the same generation and extraction holds priority, as in the paper. The state is
rebuilt from the `primitives` and `primitive_trials` tables on resume (`load`), and every draw comes from the
RNG passed in (one of the run's streams), so a resumed run discovers what an uninterrupted one would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.primitives.context import PrimitiveContext
from coco_sql.primitives.contracts import K_DEFAULT
from coco_sql.primitives.extraction import combine, extract
from coco_sql.primitives.library import Primitive, PrimitiveLibrary, PrimitiveTrial
from coco_sql.primitives.thompson import posteriors
from coco_sql.store.base import Warehouse


@dataclass
class PrimitiveState:
    """The library and trials of one run, as its tables hold them, and how the run discovers primitives."""

    language: str
    dialect: str = SANDBOX_DIALECT
    entry: str | None = None  # Python: the task's entry function
    k: int = K_DEFAULT
    generation_every: int = 5
    library: PrimitiveLibrary = field(default_factory=PrimitiveLibrary)
    trials: list[PrimitiveTrial] = field(default_factory=list)

    @classmethod
    def load(cls, store: Warehouse, run_id: int, **settings: Any) -> PrimitiveState:
        """The state of run `run_id` (empty for a new run); `settings` are the fields above the library."""
        library = PrimitiveLibrary.from_rows(store.primitives(run_id))
        return cls(**settings, library=library, trials=list(store.primitive_trials(run_id)))

    def context(self) -> PrimitiveContext:
        return PrimitiveContext(self.library, posteriors(self.library, self.trials), self.k)

    def add(self, primitive: Primitive) -> None:
        self.library = self.library.add(primitive)

    def trial(
        self,
        note: Mapping[str, Any] | None,
        iteration: int,
        program_id: str,
        parent_score: float,
        child_score: float | None,
    ) -> tuple[PrimitiveTrial, ...]:
        """Record the trial of a child a PACE operator made (`note`: its `Proposal.notes["primitive"]`; None for
        any other child): improved iff it beats its parent's score where it was judged. An unverified trial is
        kept, for the record, and moves no posterior (`thompson.posteriors`)."""
        if not note:
            return ()
        trial = PrimitiveTrial(
            iteration,
            program_id,
            note["operator"],
            note.get("focus"),
            parent_score,
            child_score,
            child_score is not None and child_score > parent_score,
            bool(note.get("verified")),
            note.get("reason"),
        )
        self.trials.append(trial)
        return (trial,)

    def discover(
        self, code: str, program_id: str, iteration: int, *, new_best: bool, rng: np.random.Generator
    ) -> tuple[Primitive, ...]:
        """At most one new primitive (module docstring), added to the library and returned."""
        found = None
        if new_best:
            found = extract(
                code,
                self.language,
                self.library,
                origin_program=program_id,
                iteration=iteration,
                dialect=self.dialect,
                entry=self.entry,
                rng=rng,
            )
        every = self.generation_every
        if found is None and every > 0 and iteration > 0 and iteration % every == 0:
            found = self._generate(iteration, rng)
        if found is None:
            return ()
        self.add(found)
        return (found,)

    def _generate(self, iteration: int, rng: np.random.Generator) -> Primitive | None:
        """E3 from the top-k primitives by posterior mean (ties: library order)."""
        beliefs = posteriors(self.library, self.trials)
        names = self.library.names(self.language)
        top = sorted(names, key=lambda n: (-beliefs[n].mean, names.index(n)))[: self.k]
        for i, first in enumerate(top):
            for second in top[i + 1 :]:
                made = combine(
                    self.library.get(first), self.library.get(second), self.library, rng, iteration=iteration,
                    dialect=self.dialect,
                )  # fmt: skip
                if made is not None:
                    return made
        return None
