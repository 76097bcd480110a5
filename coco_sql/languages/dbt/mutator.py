"""The offline (no model) mutator for dbt projects: repairs a pipeline from its training evidence.

Each iteration: the parent is scored on the training keys (`DraftEnvironment.test_draft`: the mutator never
sees other splits' rows), `evidence.Evidence` reads which expected rows mismatch, in which column and by how
much, `edits.hypotheses` turns that into edits of the models the targets read (and the macros they call), and
`crossover.merges` adds the parent combined with another archived program's edits (two partial fixes that
improved different columns). Hypotheses are drawn heaviest first with the run's RNG breaking near-ties (so a
parent drawn again tries others next), at most `max_drafts` of them (skipping approaches tried from this parent:
its children's and every draft scored on it before, `TESTED_NOTE`), and each is scored over the training keys in the dbt sandbox before it is proposed: the first
that gains on the parent (`GAIN`), else the best of them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from coco_sql.core.proposal import TESTED_NOTE
from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.crossover import merges, pairs
from coco_sql.languages.dbt.edits import Edit, hypotheses
from coco_sql.languages.dbt.evidence import Evidence
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, ValidatedProject, validate_project
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.mutate.drafts import try_drafts

if TYPE_CHECKING:
    from coco_sql.languages.kind import OfflineSettings

GAIN = 0.005  # a draft that gains this much on the training keys is proposed without testing the rest
MIN_DRAFTS = 3  # drafts tested before a gain stops the batch: near-ties (a unit fixed where it enters, or
# downstream) are compared, not drawn
DRAFT_CAP = 12  # a dbt draft costs a run (1-2 s warm): the evidence ranks well enough to stop early
SPREAD = 0.3  # the RNG's share in the order: Gumbel noise of this scale on log-weights (near-ties only)


class DbtOfflineMutator:
    name = "offline"

    def __init__(self, settings: OfflineSettings) -> None:
        """`settings` are checked (`engine.registry`): the kind's typed offline settings."""
        self.max_drafts = min(settings.max_drafts, DRAFT_CAP)
        self.probe = settings.probe

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        env = request.env
        code = request.parent.code
        parent = env.test_draft(code)
        evidence = Evidence.of(list(parent.ids), list(parent.outputs), list(parent.expected))
        try:
            project = DbtProject.from_text(code)
        except (CandidateRejected, ValueError) as error:
            return Proposal(code, "the parent does not parse as a project", discarded=str(error))
        data = env.task.kind_data
        targets = [t.model for t in data.targets]
        keys = sorted({k for t in data.targets for k in t.keys})
        found = hypotheses(project, _checked(project, data.spec), evidence, data.spec.dialect, targets=targets, keys=keys,
                           target_keys={t.model: t.keys for t in data.targets})  # fmt: skip
        root = request.context.root.code if request.context.root is not None else None
        if request.context.tried:  # drawn again: its single edits did not all gain; two at once may
            found += pairs(code, [e for e in found if e.approach not in request.context.tried])
        found += merges(code, [e.code for e in request.others], root)
        edits = [e for e in found if e.approach not in request.context.tried]
        notes: dict[str, Any] = {"candidates": len(edits), "parent_train_score": parent.score,
                                 "mismatching_columns": dict(evidence.columns.most_common(5))}  # fmt: skip
        if not edits:
            return Proposal(code, "no untried edit left", notes=notes, exhausted="no untried edit left")
        order = _order(edits, rng)
        if not self.probe:
            return Proposal(order[0].code, order[0].approach, notes=notes | {"tested": False})
        # the best of the first MIN_DRAFTS drafts once one gains (a dbt draft costs a run), or one that is whole
        found = try_drafts(env, order, lambda e: e.code, max_drafts=self.max_drafts, rng=rng,
                           enough=lambda score: score > parent.score + GAIN, min_tested=MIN_DRAFTS)  # fmt: skip
        tested = len(found.tested)
        if found.best is None:
            chosen = order[0]
            notes |= {"drafts_tested": tested}
        else:
            chosen = found.best
            notes |= {"drafts_tested": tested, "train_score": found.score}
        others = [e.approach for e in found.tested if e.approach != chosen.approach]  # never offered again
        return Proposal(chosen.code, chosen.approach, notes=notes | {TESTED_NOTE: others})


def _checked(project: DbtProject, spec: DbtSpec) -> ValidatedProject | None:
    """The parent as validated (its rendered queries name the columns its Jinja makes); None when it fails."""
    try:
        return validate_project(project, spec)
    except (CandidateRejected, ValueError):
        return None


def _order(edits: list[Edit], rng: np.random.Generator) -> list[Edit]:
    """The edits in the order they are tested: heaviest first, near-equal ones in an order the run's RNG draws
    (Gumbel noise of scale `SPREAD` on the log-weights). The edits already scored on this parent are not among
    them (the loop counts them as tried: `TESTED_NOTE`), so a parent drawn again goes on where its last batch
    stopped, whether that batch ran to its end or stopped at its first gain."""
    noise = rng.gumbel(size=len(edits)) * SPREAD
    keys = [math.log(max(e.weight, 1e-6)) + n for e, n in zip(edits, noise, strict=True)]
    return [e for _, e in sorted(zip(keys, edits, strict=True), key=lambda t: (-t[0], t[1].approach))]
