"""A toy third program kind, known only to the tests: it registers through the entry point group
`coco_sql.languages` (`tests/test_kind_plugins.py` writes a temporary `*.dist-info/entry_points.txt`), so nothing
under coco_sql/ names it.

A toy program is one line, `threshold <column> <n>`: the output is 1 where the column is at least n, else 0.
Its offline mutator moves n by one either way (the RNG picks). It runs in this process: its programs are the
test's own, never hostile.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from coco_sql.errors import CandidateRejected
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.kind import KindPlugin
from coco_sql.mutate.base import MutationRequest, Proposal

_PROGRAM = re.compile(r"\s*threshold\s+([A-Za-z_]\w*)\s+(-?\d+)\s*")


class ToyLanguage:
    name = "toy"

    def __init__(self, task: Any) -> None:
        self.task = task

    def validate(self, code: str) -> Program:
        found = _PROGRAM.fullmatch(code)
        if found is None or found.group(1) not in self.task.input_columns:
            raise CandidateRejected("a toy program is one line: threshold <input column> <integer>")
        return Program(self.name, code, code.strip(), (found.group(1), int(found.group(2))))

    def cell(self, program: Program) -> str:
        return f"0:{min(abs(program.tree[1]), 9)}"

    def runner(self, split: Any, ai: Any) -> ToyRunner:
        return ToyRunner(split.inputs)


class ToyRunner:
    def __init__(self, inputs: Any) -> None:
        self.inputs = inputs

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        start = time.perf_counter()
        column, n = program.tree
        rows = [(str(i), int(v >= n)) for i, v in zip(self.inputs["id"], self.inputs[column], strict=True)]
        return RunResult(rows, (time.perf_counter() - start) * 1000)

    def close(self) -> None:
        pass


class ToyMutator:
    name = "offline"

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        found = _PROGRAM.fullmatch(request.parent.code)
        assert found is not None
        step = 1 if rng.integers(2) else -1
        return Proposal(
            f"threshold {found.group(1)} {int(found.group(2)) + step}", f"move the threshold by {step}"
        )


def _offline(max_examples: int = 0, **settings: Any) -> ToyMutator:
    return ToyMutator()


PLUGIN = KindPlugin(
    name="toy",
    bind=lambda task, engine=None: ToyLanguage(task),
    program_prompt=lambda task: "A program is one line: threshold <column> <n>.\n",
    offline_mutator=_offline,
)
