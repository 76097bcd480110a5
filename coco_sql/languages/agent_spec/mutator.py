"""The offline mutator of agent specs: the operators of `ops.py`, fed with the parent's own training runs, each
draft tested on the training questions before one is proposed (no model of its own; the drafts' runs use the
task's model, through the same response cache).

One proposal:

1. run the parent on the mutator's training rows (`env.test_draft`: answered from the evaluator's memo or the
   response cache when it ran before), and read each row's trace and score: the history the operators read;
2. list every draft of every operator (`ops`), minus the approaches this parent's children already took
   (`context.tried`) and drafts whose canonical text is the parent's;
3. order them with the run's RNG: operator by operator in proportion to `SHARES` (the operators that spread what
   solved runs used come first more often), each operator's drafts in a random order;
4. test up to `max_drafts` of them (the smaller of the mutator's setting and the task's ``[agent_spec]
   max_drafts``: each test runs every training question) and propose the best by mean training score, the first
   drawn winning a tie. With ``probe = false``: the first draft, untested.

The mutator sees training rows only: `env` is bound to the training split, whose traces never hold an expected
answer (the runs are never given one); the task's documents it reads are the agent's own tables.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from coco_sql.core.proposal import Proposal
from coco_sql.languages.agent_spec import ops
from coco_sql.languages.agent_spec.pack import Section, document_sections
from coco_sql.languages.agent_spec.spec import dump, parse
from coco_sql.mutate.drafts import try_drafts

if TYPE_CHECKING:
    from coco_sql.languages.kind import OfflineSettings
    from coco_sql.tasks import TaskPack

#: How the drafts' order is drawn: an operator's share of the next pick while it has drafts left.
SHARES: Mapping[str, float] = {
    "add_document_section": 0.3,
    "add_verified_query": 0.3,
    "remove_verified_query": 0.1,
    "move_tool_text": 0.15,
    "reorder_instructions": 0.1,
    "split_instructions": 0.05,
}


class AgentSpecOfflineMutator:
    name = "offline"

    def __init__(self, settings: OfflineSettings) -> None:
        """`settings` are checked (`engine.registry`): the kind's typed offline settings."""
        self.make_proposal = Proposal
        self.max_drafts = settings.max_drafts
        self.probe = settings.probe

    def propose(self, request: Any, rng: np.random.Generator) -> Any:
        parent, env = request.parent, request.env
        spec = parse(parent.code)
        outcome = env.test_draft(parent.code)
        history = observed(outcome.rows)
        drafts = [
            *ops.add_document_sections(spec, history, task_sections(env.task)),
            *ops.add_verified_queries(spec, history),
            *ops.remove_verified_queries(spec, history),
            *ops.move_tool_text(spec),
            *ops.reorder_instructions(spec),
        ]
        known, tried = {dump(spec)}, request.context.tried
        fresh = []
        for draft in drafts:
            text = dump(draft.spec)
            if text not in known and draft.description not in tried:
                known.add(text)
                fresh.append((draft, text))
        ordered = draw(fresh, rng)
        notes: dict[str, Any] = {"candidates": len(fresh), "solved_runs": sum(r.solved for r in history)}
        if not ordered:
            return self.make_proposal(
                parent.code, "no untried edit left", notes=notes, exhausted="no untried edit left"
            )
        if not self.probe:
            draft, text = ordered[0]
            return self.make_proposal(text, draft.description, notes=notes | {"operator": draft.operator})
        budget = min(self.max_drafts, _task_drafts(env.task))  # the first `budget` drafts, rejected ones too
        found = try_drafts(env, ordered[:budget], lambda item: item[1], max_drafts=budget, rng=rng)
        tested = len(found.tested)
        if found.best is None:
            draft, text = ordered[0]
            return self.make_proposal(text, draft.description, notes=notes | {"drafts_tested": tested})
        draft, text = found.best
        return self.make_proposal(text, draft.description, notes=notes | {
            "operator": draft.operator, "drafts_tested": tested, "train_score": found.score,
            "parent_train_score": outcome.score})  # fmt: skip


def observed(rows: Sequence[Any]) -> list[ops.Observed]:
    """Training rows as the operators read them: the question (from the trace's user turn), solved or not, the
    trace. A row without a trace (the spec failed as a whole) is left out."""
    history = []
    for row in rows:
        trace = (row.observation or {}).get("trace")
        if isinstance(trace, Mapping):
            question = str(trace.get("user", "")).partition("\n\nGuidelines: ")[0]
            history.append(ops.Observed(row.instance_id, question, row.score >= 1.0, trace))
    return history


def draw(drafts: Sequence[tuple[ops.Draft, str]], rng: np.random.Generator) -> list[tuple[ops.Draft, str]]:
    """Every draft in drawing order (module docstring, step 3)."""
    queues: dict[str, list[tuple[ops.Draft, str]]] = {}
    for item in drafts:
        queues.setdefault(item[0].operator, []).append(item)
    queues = {op: [items[i] for i in rng.permutation(len(items))] for op, items in sorted(queues.items())}
    ordered = []
    while queues:
        names = sorted(queues)
        weights = np.array([SHARES.get(name, 0.1) for name in names], dtype=float)
        name = names[int(rng.choice(len(names), p=weights / weights.sum()))]
        ordered.append(queues[name].pop(0))
        if not queues[name]:
            del queues[name]
    return ordered


def task_sections(task: TaskPack) -> list[Section]:
    """The sections of the task's documents (the rows of the agent's ``documents`` table)."""
    documents = task.settings.get("documents", {})
    return [
        section
        for name, path in sorted(documents.items())
        if path in task.settings_files
        for section in document_sections(name, task.settings_files[path].read_text(encoding="utf-8"))
    ]


def _task_drafts(task: TaskPack) -> int:
    value = task.settings.get("max_drafts", 4)
    return value if isinstance(value, int) and value >= 1 else 4
