"""The leakage probe: unique markers planted in the expected answers of held-out (validation and test) rows, and a
search for them in anything the search shows the mutator (traces, tool results, operator drafts, prompts).

A marker found means a held-out answer reached the search. The probe is only as good as what it is shown, so the
tests that use it also show it a deliberate leak (tests/test_agent_spec_run.py), which it must find.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

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
