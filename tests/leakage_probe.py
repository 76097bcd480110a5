"""The leakage probe: unique markers planted in held-out (validation and test) rows, and a search for them in
anything the search shows the mutator (traces, tool results, operator drafts, prompts; `mutator_view`: every
history tool's answer over a finished run).

A marker found means a held-out answer reached the search. The probe is only as good as what it is shown, so the
tests that use it also show it a deliberate leak (tests/test_agent_spec_run.py), which it must find.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from coco_sql.languages.agent_spec.pack import Question


def marker(question_id: str) -> str:
    """A string no real answer, question or table holds: the same for the same id."""
    return "LEAK" + hashlib.sha256(f"held-out {question_id}".encode()).hexdigest()[:12].upper()


def plant(questions: Sequence[Question], held_out: Iterable[str]) -> tuple[list[Question], dict[str, str]]:
    """`questions` with a marker appended to each held-out row's expected answer, and the markers by id."""
    markers = {question_id: marker(question_id) for question_id in held_out}
    planted = [replace(q, answer=f"{q.answer} {markers[q.id]}") if q.id in markers else q for q in questions]
    return planted, markers


def found(texts: Iterable[str], markers: Mapping[str, str]) -> list[str]:
    """The ids whose marker appears in any of `texts`."""
    joined = "\n".join(texts)
    return sorted(question_id for question_id, text in markers.items() if text in joined)


def mutator_view(store: Any, run_id: int) -> list[str]:
    """Everything the search can read of run `run_id`, as text: every history tool (Table 6) with every program
    id, iteration, cell and training instance of the run (the row-trace tool included), whose answers hold the
    approaches, the ledger, the events and the mutator's transcripts."""
    from coco_sql.errors import CocoError
    from coco_sql.reflect.history import HistoryTools

    tools = HistoryTools(store, run_id)
    recent = tools.get_recent_scores(n=100_000)
    programs = [row["program_id"] for row in recent]
    instances = [row["instance_id"] for row in tools.get_hard_questions(n=100_000)]
    cells = sorted({row["cell"] for row in tools.get_diverse_programs()})
    calls: list[tuple[str, dict[str, Any]]] = [
        ("get_best_programs", {"n": 100_000}),
        ("get_diverse_programs", {}),
        ("get_architecture_history", {}),
        ("get_recent_scores", {"n": 100_000}),
        ("get_hard_questions", {"n": 100_000}),
        ("get_primitives", {"n": 100_000}),
        *(("get_architecture_history", {"cell": cell}) for cell in cells),
        *(("get_thinking_trace", {"iteration": row["iteration"]}) for row in recent),
    ]
    for pid in programs:
        calls += [
            ("get_program", {"program_id": pid}),
            ("get_parent", {"program_id": pid}),
            ("get_lineage", {"program_id": pid, "depth": 1000}),
            ("get_suggested_questions", {"program_id": pid, "n": 100_000}),
        ]
        calls += [("get_row_trace", {"program_id": pid, "instance_id": i}) for i in instances]
    for instance in instances:
        calls += [
            ("get_question_solvers", {"instance_id": instance, "n": 100_000}),
            ("get_question_memory", {"instance_id": instance, "n": 100_000}),
        ]
    texts = []
    for tool, kwargs in calls:
        try:
            texts.append(json.dumps(tools.call(tool, **kwargs), default=str))
        except CocoError as refusal:  # a refusal is shown to the search too
            texts.append(str(refusal))
    return texts
