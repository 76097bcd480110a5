"""dbt projects as a program kind (`languages.LANGUAGES["dbt"]`): validation and runs in the dbt sandbox.

A program is a project's text form (`project.DbtProject`). `validate` renders and checks it inside a dbt
sandbox worker (the Jinja render has no in-process deadline for every loop: the worker's kernel deadline is the
bound) and returns its run form as the `Program`'s runnable, so the evaluator's memo keys on what dbt runs.
`runner` runs it over one split's own copy of the sources (`task.DbtTask.sources`) and turns the target
models' rows into per-instance outputs here, in this process: one JSON row per key (`task.row_json`) and one
status per data test. The worker never sees expected rows.

One sandbox per split, shared by the runners of its minibatches (a dbt worker costs seconds to start); the
runner over the whole split owns it and closes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from coco_sql.errors import CandidateRejected, EvaluationError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.dbt.compare import key_text
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.task import EXTRA, EXTRA_ROWS, TEST_KINDS, DbtTask, aggregate, row_json
from coco_sql.languages.dbt.verdicts import Verdicts
from coco_sql.search.features import cell_of_counts

if TYPE_CHECKING:
    import pandas as pd

    from coco_sql.core.ai_table import LocalFunctions
    from coco_sql.languages.dbt.runner import DbtRunResult
    from coco_sql.languages.dbt.sandbox import DbtSandbox
    from coco_sql.llm.usage import Usage
    from coco_sql.sandbox import Sandbox
    from coco_sql.tasks import Split, TaskPack

_BRANCH_WORDS = ("join", "case", "where", "union", "having", "distinct", "coalesce")


class DbtLanguage:
    name = "dbt"

    def __init__(self, task: TaskPack) -> None:
        if not isinstance(task.kind_data, DbtTask):
            raise EvaluationError(f"task {task.name!r} is not a dbt pack")
        self.task = task
        self.data: DbtTask = task.kind_data
        self._sandboxes: dict[str, DbtSandbox] = {}
        self._probes: dict[str, Sandbox] = {}
        self._ai: LocalFunctions | None = None
        self._validated: Verdicts[Program] = Verdicts(self._check)

    def validate(self, code: str) -> Program:
        return self._validated(code)

    def _check(self, code: str) -> Program:
        try:
            project = DbtProject.from_text(code)
            run_form = self._validator().validate(project, self.data.spec, self.data.spec.render_deadline_s)
        except EvaluationError as error:  # the render ran past its deadline, or the worker failed
            raise CandidateRejected(f"the project could not be checked: {error}") from None
        return Program(self.name, code, run_form.to_text(), run_form)

    def cell(self, program: Program) -> str:
        return project_cell(program.tree)

    def aggregate(self, ids: Sequence[str], scores: Sequence[float]) -> float:
        """A program's score: per target, then weighted over targets and data tests (`task.aggregate`)."""
        return aggregate(self.data, ids, scores)

    def runner(self, split: Split, ai: LocalFunctions | None) -> DbtRunner:
        whole = len(split) == len(self.task.split(split.name))
        return DbtRunner(self, split, self.sandbox(split.name, ai), owner=whole)

    def sandbox(self, split: str, ai: LocalFunctions | None = None) -> DbtSandbox:
        """The split's dbt sandbox (started on first use). One started without AI functions (validation asks for a
        sandbox before any runner brings the AI runtime) is replaced once the runtime is known: its worker
        registered no AI UDFs, so every AI call in a model would fail there."""
        from coco_sql.languages.dbt.sandbox import DbtSandbox

        self._ai = self._ai or ai
        known = self._sandboxes.get(split)
        if known is not None and not known.with_ai and self._ai is not None:
            self.close(split)
            known = None
        if known is None:
            known = self._sandboxes[split] = DbtSandbox(self.data.sources[split], ai=self._ai)
        return known

    def probe_sandbox(self, split: str) -> Sandbox:
        """The split's query engine for probes (the coding agent's `query`): a locked-down DuckDB holding the
        split's instance ids as `input` and its copy of the sources, each under its `probe_tables` name. No
        expected rows: the sources are the pipeline's inputs."""
        from coco_sql.sandbox import Sandbox

        known = self._probes.get(split)
        if known is None:
            ids = self.task.split(split).inputs
            known = self._probes[split] = Sandbox(ids, tables=probe_tables(self.data.sources[split]))
        return known

    def close(self, split: str | None = None) -> None:
        for name in [split] if split is not None else list(self._sandboxes) + list(self._probes):
            for opened in (self._sandboxes, self._probes):
                sandbox = opened.pop(name, None)
                if sandbox is not None:
                    sandbox.close()

    def _validator(self) -> DbtSandbox:
        """Any open sandbox (validation needs no rows); the train split's when none is."""
        return next(iter(self._sandboxes.values()), None) or self.sandbox("train")


class DbtRunner:
    """Runs validated projects over one split's sources; outputs per instance, computed here."""

    def __init__(self, language: DbtLanguage, split: Split, sandbox: DbtSandbox, *, owner: bool) -> None:
        self.language = language
        self.split_name = split.name
        self.ids = frozenset(split.ids)
        self.sandbox = sandbox
        self.owner = owner

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        data = self.language.data
        targets = [t.model for t in data.targets]
        result = self.sandbox.run(
            program.tree, targets, deadline_s, tests=bool(data.tests), on_timeout=on_timeout
        )
        return scored_run(result, data, self.ids)

    @property
    def probe_sandbox(self) -> Sandbox:
        """The split's probe engine (`DbtLanguage.probe_sandbox`), which the evaluator's `probe` finds here."""
        return self.language.probe_sandbox(self.split_name)

    def close(self) -> None:
        if self.owner:
            self.language.close(self.split_name)


def project_cell(run_form: DbtProject) -> str:
    """A project's MAP-Elites cell: the size and branching of its models' SQL."""
    sql = " ".join(run_form.files[path] for path in run_form.models().values()).lower()
    return cell_of_counts(len(sql.split()) // 4, sum(sql.count(word) for word in _BRANCH_WORDS))


def scored_run(
    result: DbtRunResult, data: DbtTask, ids: frozenset[str], usage: Usage | None = None
) -> RunResult:
    """A run's outputs for the instances `ids` (`instance_outputs`), each failed target's reason on its rows;
    EvaluationError when no target produced a row. Shared by dbt's runner and the warehouse's (`warehouse`)."""
    outputs, errors = instance_outputs(result, data)
    outputs = [(i, o) for i, o in outputs if i in ids]
    if not any(not str(i).startswith("test:") for i, _ in outputs) and result.errors:
        model, message = next(iter(sorted(result.errors.items())))
        raise EvaluationError(f"no target produced rows; {model}: {message}")
    elapsed = sum(v for k, v in result.timings.items() if k != "write") * 1000
    reasons = {
        i: m for prefix, m in errors.items() for i in ids if i.startswith(prefix)
    }  # `model:` and `model#extra`
    return RunResult(outputs, elapsed, reasons, usage=usage)


def probe_tables(sources: Mapping[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The sources as a probe reads them: ``source.table`` under its table's name, or ``source__table`` when two
    sources share a table name."""
    tables = [name.split(".", 1)[1] for name in sources]
    return {
        (name.split(".", 1)[1] if tables.count(name.split(".", 1)[1]) == 1 else name.replace(".", "__")): rows
        for name, rows in sources.items()
    }


def instance_outputs(result: DbtRunResult, data: DbtTask) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """(instance id, output JSON) for every target row and data test, and the reason of each failed target model,
    keyed by its ids' prefix ``model:``."""
    outputs: list[tuple[str, str]] = []
    errors: dict[str, str] = {}
    for target in data.targets:
        frame = result.models.get(target.model)
        if frame is None:
            reason = result.errors.get(target.model, f"model {target.model} produced no rows")
            errors[f"{target.model}:"] = errors[f"{target.model}{EXTRA}"] = reason
            continue
        lacking = [k for k in target.keys if k not in frame.columns]
        if lacking:
            errors[f"{target.model}:"] = f"model {target.model} returns no key column {lacking[0]}"
            errors[f"{target.model}{EXTRA}"] = errors[f"{target.model}:"]
            continue
        known = data.expected_keys.get(target.model, frozenset())
        seen: set[str] = set()
        records = frame.to_dict(orient="records")
        for record in records:
            key = key_text(record, target.keys)
            seen.add(key)
            outputs.append((f"{target.model}:{key}", row_json(record, (*target.keys, *target.columns))))
        # rows no split expects, and every repeat of a key: what the target returned beyond the expected rows
        extra = len(records) - len(seen & known)
        outputs.append((f"{target.model}{EXTRA}", json.dumps({EXTRA_ROWS: extra})))
    statuses: dict[str, list[str]] = {}
    for test in result.tests:
        kind = next((k for k in TEST_KINDS if test.name.startswith(k + "_")), None)
        if kind is not None and test.attached_to and test.column:
            statuses.setdefault(f"test:{kind}:{test.attached_to}.{test.column}", []).append(test.status)
    for instance, found in statuses.items():
        outputs.append((instance, json.dumps("pass" if all(s == "pass" for s in found) else found[0])))
    return outputs, errors
