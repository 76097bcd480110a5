"""Python programs: `ast` validation (`validate`), the Python worker sandbox (`sandbox.python_sandbox`) and
AST features. Its offline operators are `languages.python.mutator`.

A program is a module that defines the task's entry function; the pack's harness (`[program] harness`) calls it
on every instance of a split inside the sandbox (`run(entry, instance)`) and answers for each instance. The answer
is the instance's output, unless the harness also defines `measure(answer, instance)`: that function runs here,
in coco-sql's own process, on this process's copy of the instance, and turns the answer into the output (or
raises to refuse it). A pack whose output must not be taken on the sandbox's word (tsp_construct's tour length:
the program could change anything inside the sandbox, the harness included) computes it there. An instance
that could not be finished (the program raised, or answered something the harness refuses) has no output, and
scores 0 with the reason; a program that finishes no instance at all fails as a whole, with the first
instance's reason as its error.

The harness is trusted pack code, like the task's data: it is executed in this process to find `measure`.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from coco_sql.errors import TaskError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.python.answers import Measure, finished, instance_rows, one_line_reason
from coco_sql.languages.python.validate import ALLOWED_MODULES, PythonSpec, validate_program
from coco_sql.sandbox.python_sandbox import PythonSandbox, PythonSandboxLimits
from coco_sql.search.features import cell_of_counts

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalFunctions
    from coco_sql.languages.python.warehouse import WarehousePythonRunner
    from coco_sql.store.base import CandidateEngine
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

    def __init__(
        self, task: TaskPack, limits: PythonSandboxLimits | None = None, engine: CandidateEngine | None = None
    ) -> None:
        """`engine`: a warehouse that runs the programs itself as its own UDFs (Snowflake); by default they run
        in the Python sandbox."""
        self.task = task
        self.engine = engine
        self.spec = pack_spec(task)
        self.limits = limits
        self.measure = harness_measure(task)

    def validate(self, code: str) -> Program:
        tree = validate_program(code, self.spec)
        return Program(self.name, code, code, tree)

    def cell(self, program: Program) -> str:
        tree: ast.Module = program.tree
        nodes = sum(1 for _ in ast.walk(tree))
        branches = sum(1 for node in ast.walk(tree) if isinstance(node, BRANCH_NODES))
        return cell_of_counts(nodes, branches)

    def runner(self, split: Split, ai: LocalFunctions | None) -> PythonRunner | WarehousePythonRunner:
        if self.engine is not None:
            from coco_sql.languages.python.warehouse import WarehousePythonRunner

            return WarehousePythonRunner(
                self.engine, split, list(self.task.input_columns), self.task.harness or "", self.spec.entry,
                self.measure,
            )  # fmt: skip
        instances = instance_rows(split.inputs, list(self.task.input_columns))
        sandbox = PythonSandbox(
            instances,
            harness=self.task.harness or "",
            entry=self.spec.entry,
            modules=self.spec.modules,
            limits=self.limits,
        )
        return PythonRunner(sandbox, self.measure, dict(instances))


class PythonRunner:
    """Runs validated modules over the split's instances in its Python sandbox; with the harness's `measure`,
    turns each answer into its output here, on `instances` (this process's own copy)."""

    def __init__(
        self,
        sandbox: PythonSandbox,
        measure: Measure | None = None,
        instances: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> None:
        self.sandbox = sandbox
        self.measure = measure
        self.instances = instances or {}

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        result = self.sandbox.run(program.runnable, deadline_s, on_timeout)
        return finished(
            list(result.outputs), dict(result.failures), result.elapsed_ms, self.measure, self.instances
        )

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


def harness_measure(task: TaskPack) -> Measure | None:
    """The harness's `measure(answer, instance)`, executed here (trusted pack code), or None when it has none.
    TaskError (one line) when the harness fails to load."""
    if task.harness is None or _function(task.harness, "measure", f"task {task.name!r}: the harness") is None:
        return None
    namespace: dict[str, Any] = {"__name__": "harness"}
    try:
        exec(compile(task.harness, "harness.py", "exec"), namespace)
    except Exception as error:
        raise TaskError(
            f"task {task.name!r}: the harness fails when loaded: {one_line_reason(error)}"
        ) from None
    measure = namespace.get("measure")
    return measure if callable(measure) else None


def _function(source: str, name: str, what: str) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise TaskError(f"{what} is not Python: {error.msg} (line {error.lineno})") from None
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    return found[-1] if found else None
