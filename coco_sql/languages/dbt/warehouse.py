"""dbt projects on a warehouse that runs candidates itself (Snowflake: `Warehouse.candidate_engine()`), as
warehouse queries, without a dbt process: what a stored procedure can run (it may not start a process, so the
dbt sandbox of `sandbox` cannot run there; `engines.snowflake.strict` enforces that in tests).

**Compiled SQL, not ``EXECUTE DBT PROJECT``.** Snowflake runs dbt natively ("dbt Projects on Snowflake"), but
what ``EXECUTE DBT PROJECT`` executes is a DBT PROJECT object (a schema-level object holding versioned project
files) or a workspace, and those files are deployed into it from a Git repository stage, another dbt project
object, an internal named stage or a workspace (docs: CREATE DBT PROJECT, EXECUTE DBT PROJECT, "Understand dbt
project objects": each version is immutable; a change means a new version). Evaluating a candidate that way
would mean writing its files to a stage and creating (or versioning) a schema object for each of the hundreds
of candidates a run scores, from inside the procedure, with a ``profiles.yml`` naming a target schema where dbt
writes its models as permanent objects. Whether ``EXECUTE DBT PROJECT`` may run inside a stored procedure at
all, and whether dbt there would see the procedure's temporary tables (the split's staged rows), we could not
verify in the docs found. So each model is compiled by our own sandboxed Jinja renderer, the one the validator
already runs (`render`), and run as a warehouse query (`compiled`): Cortex answers its AI calls, the split's
staged rows are all it reads, and its tables are temporary, dropped after each evaluation. ``EXECUTE DBT
PROJECT`` remains the deployment path for a champion (`coco_export(run, 'dbt_project')`).

**Same scores as dbt's runner.** The target models' rows and the data tests' outcomes become a
`runner.DbtRunResult`, scored by the same code as the dbt sandbox's (`language.scored_run`): one instance per
expected row, compared by key. On one project the two paths give the same outputs (tests/test_dbt_warehouse.py
checks it for the seed, a repaired project, failing tests and failing models).

Validation runs in this process (`validate.validate_project`), with the renderer's own deadline checks (every
call, every 1,024 loop steps and output chunk); the dbt sandbox runs it under a kernel deadline as well, which a
procedure cannot have. The split's sources are staged once per split (`CandidateEngine.stage_rows`) and shared by
the runners of its minibatches; the runner over the whole split owns them and drops them when closed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from coco_sql.errors import EvaluationError
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.dbt.compiled import Deadline, read_targets, run_models, run_result
from coco_sql.languages.dbt.data_tests import run_tests
from coco_sql.languages.dbt.language import project_cell, scored_run
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.runner import PROFILE
from coco_sql.languages.dbt.task import DbtTask, aggregate
from coco_sql.languages.dbt.validate import ValidatedProject, validate_project
from coco_sql.languages.dbt.verdicts import Verdicts
from coco_sql.store.base import CandidateEngine

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalFunctions
    from coco_sql.tasks import Split, TaskPack


class DbtWarehouseLanguage:
    """The dbt kind bound to a warehouse engine (module docstring)."""

    name = "dbt"

    def __init__(self, task: TaskPack, engine: CandidateEngine) -> None:
        if not isinstance(task.kind_data, DbtTask):
            raise EvaluationError(f"task {task.name!r} is not a dbt task")
        self.task = task
        self.data: DbtTask = task.kind_data
        self.engine = engine
        self._validated: Verdicts[ValidatedProject] = Verdicts(
            lambda code: validate_project(code, self.data.spec)
        )
        self._staged: dict[str, dict[tuple[str, str], str]] = {}

    def validate(self, code: str) -> Program:
        project = self.validated(code)
        run_form = DbtProject.of(project.run_files(PROFILE))
        return Program(self.name, code, run_form.to_text(), run_form)

    def validated(self, code: str) -> ValidatedProject:
        """The checked project of `code` (kept for the last few hundred programs); CandidateRejected else."""
        return self._validated(code)

    def cell(self, program: Program) -> str:
        return project_cell(program.tree)

    def aggregate(self, ids: Sequence[str], scores: Sequence[float]) -> float:
        """A program's score as on DuckDB (`DbtLanguage.aggregate`): per target, then weighted over targets and
        data tests (`task.aggregate`), not the plain mean of the rows."""
        return aggregate(self.data, ids, scores)

    def runner(self, split: Split, ai: LocalFunctions | None) -> WarehouseDbtRunner:
        """`ai` is not used: the warehouse's own AI functions answer the models' calls."""
        whole = len(split) == len(self.task.split(split.name))
        return WarehouseDbtRunner(self, split, owner=whole)

    def staged(self, split: str) -> dict[tuple[str, str], str]:
        """The split's source tables in the warehouse, (source, table) -> its staged table (staged once)."""
        if split not in self._staged:
            staged = {}
            for name, rows in self.data.sources[split].items():
                source, table = name.split(".")
                staged[(source, table)] = self.engine.stage_rows(f"{split}_{source}_{table}", rows)
            self._staged[split] = staged
        return self._staged[split]

    def close(self, split: str | None = None) -> None:
        for name in [split] if split is not None else list(self._staged):
            for table in self._staged.pop(name, {}).values():
                self.engine.drop_staged(table)


class WarehouseDbtRunner:
    """Runs validated projects over one split's staged sources; outputs per instance, scored as dbt's are."""

    def __init__(self, language: DbtWarehouseLanguage, split: Split, *, owner: bool) -> None:
        self.language = language
        self.split_name = split.name
        self.ids = frozenset(split.ids)
        self.owner = owner
        self.sources = language.staged(split.name)
        self._probes: Any = None  # the engine's probe runner (`CandidateEngine.probes`), on first use
        self._probe_table: str | None = None

    @property
    def probe_sandbox(self) -> Any:
        """Probes over the split's instance ids as `input`, on the warehouse (no DuckDB worker process)."""
        if self._probes is None:
            ids = pd.DataFrame({"id": sorted(self.ids)})
            self._probe_table = self.language.engine.stage_rows(f"{self.split_name}_ids", ids)
            self._probes = self.language.engine.probes({"input": self._probe_table})
        return self._probes

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        language = self.language
        project = language.validated(program.source)
        data = language.data
        targets = [t.model for t in data.targets]
        deadline = Deadline(deadline_s)
        engine = language.engine
        run = run_models(engine, project, targets, self.sources, data.spec.dialect, deadline)
        try:
            clock = time.perf_counter()
            tests = run_tests(engine, project, run, self.sources, frozenset(data.tests) & self.ids, deadline)
            tested = time.perf_counter() - clock
            clock = time.perf_counter()
            models = read_targets(engine, project, run, targets, deadline)
            timings = {"test": tested, "read": time.perf_counter() - clock}
        finally:
            for relation in run.relations.values():
                engine.drop_staged(relation.table)
        return scored_run(run_result(models, tests, run, timings), data, self.ids, run.usage)

    def close(self) -> None:
        if self._probe_table is not None:
            self.language.engine.drop_staged(self._probe_table)
            self._probe_table = self._probes = None
        if self.owner:
            self.language.close(self.split_name)
