"""A toy third program kind, known only to the tests: it registers through the entry point group
`coco_sql.languages` (`tests/test_kind_plugins.py` writes a temporary `*.dist-info/entry_points.txt`), so nothing
under coco_sql/ names it.

A toy program is one line, `threshold <column> <n>`: the output is 1 where the column is at least n, else 0.
Its offline mutator moves n by `step` either way (the RNG picks): `step` is the toy's own offline setting
(`ToySettings`, `mutator_settings={'step': 2}`), and `start` its own coco_task option (`TASK_OPTIONS`); both are
listed by `CALL coco_help(...)` and the docs with no file under coco_sql/ naming them. It runs in this process: its
programs are the test's own, never hostile.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from coco_sql.errors import CandidateRejected, TaskError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.kind import KindPlugin, OfflineSettings
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.options import Option, OptionTable, as_object, check_task_name, setting
from coco_sql.tasks import load_task

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


@dataclass(frozen=True)
class ToySettings(OfflineSettings):
    """The toy's offline settings: those every kind takes, and its own."""

    step: int = setting(1, "how far the toy mutator moves a threshold", low=1, high=9, example="2")


TASK_OPTIONS = OptionTable(
    "coco_task(name, source, {'kind': 'toy', ...})",
    (
        Option("kind", "choice", None, "required: 'toy'", choices=("toy",), nullable=True, example="'toy'"),
        Option("start", "integer", 0, "the seed program's threshold", low=-100, high=100, example="4"),
    ),
)


class ToyRegistrar:
    """`CALL coco_task(name, 'table', {'kind': 'toy', 'start': 4})`: a toy task over a table of (id, x, label)."""

    def check(self, name: object, source: object, options: object) -> Mapping[str, Any]:
        check_task_name(name, error=TaskError)
        if not isinstance(source, str):
            raise TaskError(f"task {name!r}: a toy task reads one table (got {source!r})")
        checked = TASK_OPTIONS.check(
            as_object(options, "the options"), error=TaskError, prefix=f"task {name!r}: "
        )
        return {**checked, "source": source}

    def queries(self, checked: Mapping[str, Any]) -> list[str]:
        return [checked["source"]]

    def register(self, name: str, checked: Mapping[str, Any], store: Any) -> dict[str, Any]:
        rows, types = store.read_source(checked["source"])
        options = {k: v for k, v in checked.items() if k != "source"}
        pack = _pack(name, options, rows)
        store.register_task(name, checked["source"], options, types, rows)
        return {"task": name, "rows": len(rows), **{s: len(pack.split(s)) for s in ("train", "val", "test")}}

    def load(self, name: str, registered: Any) -> Any:
        return _pack(name, registered.options, registered.rows)


def _pack(name: str, options: Mapping[str, Any], rows: Any) -> Any:
    """The toy pack of registered rows, written to a temporary folder and loaded as a pack."""
    root = Path(tempfile.mkdtemp(prefix="coco_toy_")) / name
    (root / "data").mkdir(parents=True)
    rows.to_csv(root / "data" / "pool.csv", index=False)
    (root / "seed.toy").write_text(f"threshold x {int(options.get('start', 0))}\n")
    (root / "task.toml").write_text(
        f'name = "{name}"\ndescription = "a toy task"\nlanguage = "toy"\n[data]\npool = "data/pool.csv"\n'
        'expected_column = "label"\n[data.input_columns]\nx = "INTEGER"\n[splits]\nseed = 7\n'
        "train_fraction = 0.5\ntest_fraction = 0.25\n"
        '[contract]\noutput = "label"\ntype = "INTEGER"\n[scorer]\nkind = "exact"\n[program]\nseed = "seed.toy"\n'
    )
    return load_task(root)


class ToyMutator:
    name = "offline"

    def __init__(self, settings: ToySettings) -> None:
        self.step = settings.step

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        found = _PROGRAM.fullmatch(request.parent.code)
        assert found is not None
        step = self.step if rng.integers(2) else -self.step
        return Proposal(
            f"threshold {found.group(1)} {int(found.group(2)) + step}", f"move the threshold by {step}"
        )


def _offline(settings: ToySettings | None = None) -> ToyMutator:
    return ToyMutator(settings or ToySettings())


PLUGIN = KindPlugin(
    name="toy",
    bind=lambda task, engine=None: ToyLanguage(task),
    program_prompt=lambda task: "A program is one line: threshold <column> <n>.\n",
    offline_mutator=_offline,
    offline_settings=ToySettings,
    task_options=TASK_OPTIONS,
    registrar=ToyRegistrar(),
)


# -- the toy's own commands of `coco-sql`: entry points of `coco_sql.commands` and `coco_sql.init` ---------------
def add_command(commands: argparse._SubParsersAction) -> None:
    """`coco-sql toy-check PROGRAM`: whether PROGRAM reads as a toy program (a one-line error when not)."""
    check = commands.add_parser("toy-check", help="check that a line is a toy program")
    check.add_argument("program", help="the program's line")
    check.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> int:
    if _PROGRAM.fullmatch(args.program) is None:
        raise TaskError("a toy program is one line: threshold <input column> <integer>")
    print("a toy program")
    return 0


def add_init(kinds: argparse._SubParsersAction) -> None:
    """`coco-sql init toy FOLDER`: a toy seed program in FOLDER."""
    init = kinds.add_parser("toy", help="a toy seed program")
    init.add_argument("folder", type=Path, help="where to write seed.toy")
    init.set_defaults(handler=_init)


def _init(args: argparse.Namespace) -> int:
    args.folder.mkdir(parents=True, exist_ok=True)
    (args.folder / "seed.toy").write_text("threshold x 0\n")
    print(f"wrote {args.folder / 'seed.toy'}")
    return 0
