"""Python programs: `ast` validation (`validate`), the Python worker sandbox (`sandbox.python_sandbox`) and
AST features. Its offline operators are `mutate.python_mutator`.

A program is a module that defines the task's entry function; the pack's harness (`[program] harness`) calls it
on every instance of a split inside the sandbox and turns each instance into its output. An instance the harness
could not finish (the program raised, or answered something the harness refuses) has no output, and scores 0
with "no output row for this id"; a program that finishes no instance at all fails as a whole, with the first
instance's reason as its error.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from coco_sql.errors import EvaluationError, TaskError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.python.validate import ALLOWED_MODULES, PythonSpec, validate_program
from coco_sql.sandbox.python_sandbox import PythonSandbox, PythonSandboxLimits
from coco_sql.search.features import cell_of_counts

if TYPE_CHECKING:
    import pandas as pd

    from coco_sql.aifuncs.functions import AiFunctions
    from coco_sql.tasks import Split, TaskPack

#: The nodes that count as a decision point of a program (its MAP-Elites branching).
BRANCH_NODES = (
    ast.If,
    ast.IfExp,
    ast.While,
    ast.For,
    ast.AsyncFor,
    ast.comprehension,
    ast.Try,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.Lambda,
)


class PythonLanguage:
    name = "python"

    def __init__(self, task: TaskPack, limits: PythonSandboxLimits | None = None) -> None:
        self.task = task
        self.spec = pack_spec(task)
        self.limits = limits

    def validate(self, code: str) -> Program:
        tree = validate_program(code, self.spec)
        return Program(self.name, code, code, tree)

    def cell(self, program: Program) -> str:
        tree: ast.Module = program.tree
        nodes = sum(1 for _ in ast.walk(tree))
        branches = sum(1 for node in ast.walk(tree) if isinstance(node, BRANCH_NODES))
        return cell_of_counts(nodes, branches)

    def runner(self, split: Split, ai: AiFunctions | None) -> PythonRunner:
        sandbox = PythonSandbox(
            instance_rows(split.inputs, list(self.task.input_columns)),
            harness=self.task.harness or "",
            entry=self.spec.entry,
            modules=self.spec.modules,
            limits=self.limits,
        )
        return PythonRunner(sandbox)


class PythonRunner:
    """Runs validated modules over the split's instances in its Python sandbox."""

    def __init__(self, sandbox: PythonSandbox) -> None:
        self.sandbox = sandbox

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        result = self.sandbox.run(program.runnable, deadline_s, on_timeout)
        if not result.outputs and result.failures:
            instance_id, reason = result.failures[0]
            raise EvaluationError(f"the program failed on every instance; on {instance_id}: {reason}")
        outputs: list[tuple[object, object]] = list(result.outputs)
        return RunResult(outputs, result.elapsed_ms, dict(result.failures))

    def close(self) -> None:
        self.sandbox.close()


def pack_spec(task: TaskPack) -> PythonSpec:
    """What every program of the pack must define: its entry function, with the seed's number of positional
    parameters. TaskError (one line) when the pack's own code does not fit: a seed that does not parse or lacks
    the entry function, a harness without `run(entry, instance)`."""
    where = f"task {task.name!r}"
    if task.entry is None or task.harness is None:
        raise TaskError(f"{where}: a python pack needs [program] entry and harness")
    if not task.entry.isidentifier():
        raise TaskError(f"{where}: [program] entry must be a Python function name (got {task.entry!r})")
    seed = _function(task.seed_program, task.entry, f"{where}: the seed program")
    if seed is None:
        raise TaskError(f"{where}: the seed program defines no top-level function {task.entry!r}")
    harness = _function(task.harness, "run", f"{where}: the harness")
    if harness is None or len(harness.args.args) != 2:
        raise TaskError(f"{where}: the harness must define run(entry, instance)")
    arity = len(seed.args.posonlyargs) + len(seed.args.args)
    return PythonSpec(entry=task.entry, arity=arity, modules=ALLOWED_MODULES)


def _function(source: str, name: str, what: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise TaskError(f"{what} is not Python: {error.msg} (line {error.lineno})") from None
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    return found[-1] if found else None


def instance_rows(inputs: pd.DataFrame, columns: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """A split's input frame as `(id, {column: value})` pairs of plain Python values (arrays become lists)."""
    records = inputs[["id", *columns]].to_dict("records")
    return [(str(record["id"]), {c: _plain(record[c]) for c in columns}) for record in records]


def _plain(value: Any) -> Any:
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else value
