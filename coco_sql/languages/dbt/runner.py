"""Run a validated dbt project on real dbt (dbt-core + dbt-duckdb, as a library) over an in-memory DuckDB.

`DbtSession` is the warm worker: dbt's import costs ~3 s and a full parse ~2 s (most of it dbt's own ~1,000
built-in macros), while a partial parse after a model changed costs ~0.5 s. A session keeps one work directory
and one profile for all its runs, so dbt's partial parse carries over from run to run; the database does not:
each run gets a fresh in-memory DuckDB (the plugin fills it, `inputs`), which is dropped when the run ends.

One run: audit the run form of the project (`validate.ValidatedProject.run_files`; `run_form.audit`: no Jinja the
validator did not write, whoever made the form), write it, ``dbt parse``, then
``dbt run`` and ``dbt test`` on the targets and everything upstream of them, with the parsed manifest handed
over in-process. ``run`` and ``test`` are separate on purpose: ``build`` skips a model downstream of a failing
test, and a program's rows are scored even when its data tests fail. Each target's rows are read back from
the run's own connection. Failures come back as one line per node; a project dbt cannot parse raises
`EvaluationError`.

Where dbt writes (the sandbox needs this; observed with dbt 1.11): the project files, target/
(partial_parse.msgpack, compiled/ and run/ SQL, run_results.json) and logs/ all under the session's work
directory; no manifest.json (``--no-write-json``), no log file (``--log-level-file none``), no usage stats
or version check (no network).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from coco_sql.errors import CandidateRejected, EvaluationError, EvaluationTimeout
from coco_sql.languages.dbt import run_form
from coco_sql.languages.dbt.inputs import RegisterUdfs, RunInputs, new_token, opened
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec, ValidatedProject, validate_project
from coco_sql.sqlkit.rejection import one_line

PROFILE = "coco"
SCHEMA = "main"
Reader = Callable[[duckdb.DuckDBPyConnection, str], Any]


@dataclass(frozen=True)
class TestOutcome:
    """One data test: dbt's name for it, the model (or source) and column it checks, and how it ended."""

    name: str
    attached_to: str | None
    column: str | None
    status: str  # pass | fail | warn | error | skipped
    failures: int | None
    message: str

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass(frozen=True)
class CompiledModel:
    """One model as dbt compiled it: `sql`, its own file rendered (before ephemeral models' CTEs are injected),
    `ran`, the SQL its materialization ran (with them), and what ``ref()`` and ``source()`` give in the project
    (``"ref('m')"`` / ``"source('s', 't')"`` -> the relation's name, an ephemeral model's CTE name)."""

    sql: str
    ran: str
    relations: Mapping[str, str] = field(hash=False)


@dataclass(frozen=True)
class DbtRunResult:
    """Each target model's rows, every data test's outcome, a one-line error per failed or skipped model, and
    where the time went (seconds: write, parse, run, test, read)."""

    models: Mapping[str, Any] = field(hash=False)  # a DataFrame each, unless `run_files` read them otherwise
    tests: tuple[TestOutcome, ...]
    errors: Mapping[str, str] = field(hash=False)
    timings: Mapping[str, float] = field(hash=False)
    # what dbt itself compiled and ran, read from its own nodes (tests/test_dbt_differential.py compares it with
    # what the validator checked); empty where the run did not come from a `DbtSession` in this process
    compiled: Mapping[str, CompiledModel] = field(default_factory=dict, hash=False)

    @property
    def tests_passed(self) -> int:
        return sum(t.passed for t in self.tests)


class DbtSession:
    """A warm dbt in this process: one work directory, one profile, partial parsing across runs.

    Not thread-safe (dbt keeps process-wide state); use one session per process. `static_parser=False` has dbt
    render every model's Jinja instead of reading its refs with dbt_extractor, whose pool of threads, once
    started, lasts as long as the process (a worker template's warm-up: `worker.preload`). `token` names the
    session's inputs in the profile (default: a new one); dbt reuses a saved parse only under the same profile,
    so a session that starts from another's `partial_parse.msgpack` takes its token too.
    """

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        partial_parse: bool = True,
        memory_limit: str = "1GB",
        static_parser: bool = True,
        token: str | None = None,
    ) -> None:
        from dbt.cli.main import dbtRunner  # dbt is optional: imported only when a session starts

        self._runner_class = dbtRunner
        self._owned = workdir is None
        self.workdir = Path(tempfile.mkdtemp(prefix="coco-dbt-")) if workdir is None else workdir
        self.project_dir = self.workdir / "project"
        self.project_dir.mkdir(parents=True, exist_ok=True)
        self.partial_parse = partial_parse
        self.static_parser = static_parser
        self.memory_limit = memory_limit
        self._token = new_token() if token is None else token
        self._inputs: RunInputs | None = None
        self.interrupted = False
        (self.workdir / "profiles.yml").write_text(self._profile())

    def __enter__(self) -> DbtSession:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owned:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _profile(self) -> str:
        return (
            f"{PROFILE}:\n  target: run\n  outputs:\n    run:\n      type: duckdb\n      path: ':memory:'\n"
            f"      schema: {SCHEMA}\n      threads: 1\n      plugins:\n"
            f"        - module: coco_sql.languages.dbt.plugin\n          config:\n            run: '{self._token}'\n"
        )

    def _flags(self) -> list[str]:
        return [
            "--project-dir", str(self.project_dir),
            "--profiles-dir", str(self.workdir),
            "--target-path", str(self.workdir / "target"),
            "--log-path", str(self.workdir / "logs"),
            "--log-level", "none",
            "--log-level-file", "none",
            "--no-send-anonymous-usage-stats",
            "--no-version-check",
            "--no-write-json",
            "--no-use-colors",
            "--partial-parse" if self.partial_parse else "--no-partial-parse",
            "--static-parser" if self.static_parser else "--no-static-parser",
        ]  # fmt: skip

    def _sync(self, files: Mapping[str, str]) -> None:
        """Make the project directory hold exactly `files` (unchanged files are left alone)."""
        for path in sorted(self.project_dir.rglob("*"), reverse=True):
            relative = path.relative_to(self.project_dir).as_posix()
            if path.is_file() and relative not in files:
                path.unlink()
            elif path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        for relative, content in files.items():
            parts = relative.split("/")
            if relative.startswith("/") or any(part in ("", ".", "..") for part in parts):
                raise EvaluationError(f"run-form path {relative[:200]!r} is not a plain relative path")
            target = self.project_dir / relative
            if target.is_file() and target.read_text(encoding="utf-8") == content:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content, encoding="utf-8")

    def run(
        self,
        project: ValidatedProject,
        sources: Mapping[str, Any],
        targets: Sequence[str],
        *,
        register_udfs: RegisterUdfs | None = None,
        tests: bool = True,
    ) -> DbtRunResult:
        """Run `project` over `sources` (``"source.table"`` -> DataFrame or arrow table) and return the
        `targets`' rows. Raises `EvaluationError` when dbt cannot parse the project or a target is unknown."""
        unknown = [t for t in targets if t not in project.models]
        if unknown:
            raise EvaluationError(f"no model {unknown[0]!r} in the project to read back")
        files = project.run_files(PROFILE)
        return self.run_files(files, sources, targets, register_udfs=register_udfs, tests=tests)

    def run_files(
        self,
        files: Mapping[str, str],
        sources: Mapping[str, Any],
        targets: Sequence[str],
        *,
        register_udfs: RegisterUdfs | None = None,
        tests: bool = True,
        read: Reader | None = None,
    ) -> DbtRunResult:
        """`run` for a project's run form as it is (path -> content; the sandbox worker's entry: the form was
        validated where the parent chose). `read(connection, sql)` reads a target's rows (default: a
        DataFrame). EvaluationTimeout when `interrupt` stopped the run."""
        from dbt.adapters.duckdb.connections import DuckDBConnectionManager

        try:  # whoever made the form: dbt renders no Jinja that the validator did not write (`run_form`)
            run_form.audit(files)
        except CandidateRejected as error:
            raise EvaluationError(str(error)) from None
        tables = _source_tables(sources)
        if any(not t or '"' in t for t in targets):
            raise EvaluationError("a target must be a model name without quotes")
        self.interrupted = False
        timings: dict[str, float] = {}
        clock = time.perf_counter()
        self._sync(files)
        timings["write"] = time.perf_counter() - clock
        inputs = RunInputs(tables, register_udfs, self.memory_limit)
        self._inputs = inputs
        try:
            with opened(self._token, inputs):
                clock = time.perf_counter()
                parsed = self._runner_class().invoke(["parse", *self._flags()])
                timings["parse"] = time.perf_counter() - clock
                if not parsed.success or parsed.result is None:
                    raise EvaluationError(f"dbt could not parse the project: {_exception(parsed)}")
                selection = ["--select", " ".join(f"+{t}" for t in targets)]
                runner = self._runner_class(manifest=parsed.result)
                clock = time.perf_counter()
                ran = runner.invoke(["run", *selection, *self._flags()])
                timings["run"] = time.perf_counter() - clock
                self._check_interrupted()
                errors = _node_errors(ran, "model")
                if ran.result is None:
                    raise EvaluationError(f"dbt run failed: {_exception(ran)}")
                outcomes: tuple[TestOutcome, ...] = ()
                if tests:
                    clock = time.perf_counter()
                    tested = runner.invoke(["test", *selection, *self._flags()])
                    timings["test"] = time.perf_counter() - clock
                    self._check_interrupted()
                    outcomes = _test_outcomes(tested)
                clock = time.perf_counter()
                models = _read_models(inputs, targets, errors, read or _frame)
                timings["read"] = time.perf_counter() - clock
                compiled = _compiled(ran, parsed.result)
        finally:
            self._inputs = None
            if inputs.connection is not None:
                inputs.connection.close()
            DuckDBConnectionManager.close_all_connections()  # the next run starts from an empty database
        return DbtRunResult(models, outcomes, errors, timings, compiled)

    def interrupt(self) -> None:
        """Stop the query the current run is executing, and the run with it (`run_files` then raises
        EvaluationTimeout). Called from another thread (a deadline's timer); dbt goes on to the next model, so
        the caller repeats it until the run returns."""
        self.interrupted = True
        inputs = self._inputs
        if inputs is not None:
            inputs.interrupt()

    def _check_interrupted(self) -> None:
        if self.interrupted:
            raise EvaluationTimeout("the dbt run was stopped at its deadline")


def run_project(
    program: DbtProject | ValidatedProject | str,
    sources: Mapping[str, Any],
    targets: Sequence[str],
    *,
    spec: DbtSpec | None = None,
    register_udfs: RegisterUdfs | None = None,
    tests: bool = True,
) -> DbtRunResult:
    """Validate (unless already validated) and run one project in a session of its own (cold: for one-off
    runs and scripts; an evaluation loop keeps a `DbtSession`)."""
    validated = program if isinstance(program, ValidatedProject) else validate_project(program, spec)
    with DbtSession() as session:
        return session.run(validated, sources, targets, register_udfs=register_udfs, tests=tests)


def _source_tables(sources: Mapping[str, Any]) -> dict[tuple[str, str], Any]:
    tables: dict[tuple[str, str], Any] = {}
    for key, rows in sources.items():
        source, _, table = key.partition(".")
        if not source or not table or "." in table or '"' in key:
            raise EvaluationError(f"source table {key!r} must be named 'source.table'")
        tables[(source, table)] = rows
    return tables


def _exception(result: Any) -> str:
    if result.exception is not None:
        return one_line(str(result.exception))
    return "dbt reported a failure without a message"


def _status(result: Any) -> str:
    return str(getattr(result.status, "value", result.status))


def _node_errors(invocation: Any, resource_type: str) -> dict[str, str]:
    errors: dict[str, str] = {}
    for result in getattr(invocation.result, "results", None) or ():
        if str(result.node.resource_type) != resource_type:
            continue
        status = _status(result)
        if status in ("error", "skipped"):
            errors[result.node.name] = one_line(f"{status}: {result.message or 'an upstream model failed'}")
    return errors


def _test_outcomes(invocation: Any) -> tuple[TestOutcome, ...]:
    outcomes = []
    for result in getattr(invocation.result, "results", None) or ():
        node = result.node
        attached = getattr(node, "attached_node", None)
        outcomes.append(
            TestOutcome(
                name=node.name,
                attached_to=attached.rsplit(".", 1)[-1] if attached else None,
                column=getattr(node, "column_name", None),
                status=_status(result),
                failures=result.failures,
                message=one_line(result.message or ""),
            )
        )
    return tuple(sorted(outcomes, key=lambda t: t.name))


def _frame(connection: duckdb.DuckDBPyConnection, sql: str) -> pd.DataFrame:
    return connection.execute(sql).df()


def _read_models(
    inputs: RunInputs, targets: Sequence[str], errors: Mapping[str, str], read: Reader
) -> dict[str, Any]:
    """Each target's rows from the run's database (a target that failed is left out; its error says why)."""
    models: dict[str, Any] = {}
    if inputs.connection is None:
        return models
    for target in targets:
        if target in errors:
            continue
        models[target] = read(inputs.connection, f'SELECT * FROM "{SCHEMA}"."{target}"')
    return models


def _compiled(invocation: Any, manifest: Any) -> dict[str, CompiledModel]:
    """Each model that ran, as dbt compiled it (`CompiledModel`), read from dbt's own nodes."""
    names: dict[str, str] = {}
    for source in manifest.sources.values():
        names[f"source('{source.source_name}', '{source.name}')"] = _relation_name(source)
    for node in manifest.nodes.values():
        if str(node.resource_type) == "model":
            names[f"ref('{node.name}')"] = _relation_name(node)
    compiled: dict[str, CompiledModel] = {}
    for result in getattr(invocation.result, "results", None) or ():
        node = result.node
        if str(node.resource_type) != "model" or node.compiled_code is None:
            continue
        own = getattr(node, "_pre_injected_sql", None) or node.compiled_code
        compiled[node.name] = CompiledModel(own, node.compiled_code, names)
    return compiled


def _relation_name(node: Any) -> str:
    """What ``ref()`` / ``source()`` renders for `node`: its relation, or an ephemeral model's CTE name."""
    if getattr(node, "relation_name", None):
        return str(node.relation_name)
    return f"__dbt__cte__{node.name}"
