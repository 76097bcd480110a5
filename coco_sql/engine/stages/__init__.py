"""The stages Algorithm 1 composes, one small object each, in the order an iteration runs them:

    select    p'_t ~ pi(A_{t-1}), a parent the mutator still has something for    (select.py)
    curate    c_t, the context bundle for that parent                           (curate.py)
    mutate    p_t, the mutator's proposal on T_t, and what its drafts spent     (mutate.py)
    judge     S_t, O_t: the child's outcomes, minibatch gate, honest train, cost (judge.py)
    admit     A_t: the admission policy and the islands' migration              (admit.py)
    account   the spend limit, price checks and the AI rows of each batch       (account.py)
    record    H_t: one batch per iteration, the run's state, events, progress   (record.py)

`finish.py` ends a run: test scores of the seed and the champion, and the summary. The loop (`engine.loop`)
builds the stages for a run and calls them; none of them knows the others' internals.
"""

from __future__ import annotations

from dataclasses import dataclass

from coco_sql.engine.stages.account import Account
from coco_sql.engine.stages.admit import ADMISSIONS, AdmissionPolicy, Admit, make_admission
from coco_sql.engine.stages.curate import Curate, make_curator
from coco_sql.engine.stages.judge import Judge, Verdict
from coco_sql.engine.stages.mutate import Attempts, Mutate, make_mutator
from coco_sql.engine.stages.record import Judged, Record
from coco_sql.engine.stages.select import Select, Selection, make_policy


@dataclass(frozen=True)
class Stages:
    """One run's stages (module docstring)."""

    select: Select
    curate: Curate
    mutate: Mutate
    judge: Judge
    admit: Admit
    account: Account
    record: Record


__all__ = [
    "ADMISSIONS",
    "Account",
    "AdmissionPolicy",
    "Admit",
    "Attempts",
    "Curate",
    "Judge",
    "Judged",
    "Mutate",
    "Record",
    "Select",
    "Selection",
    "Stages",
    "Verdict",
    "make_admission",
    "make_curator",
    "make_mutator",
    "make_policy",
]
