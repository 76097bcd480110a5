"""The one entry point: evolve, resume, evaluate, status and export, for the CLI, the SQL procedures and tests.

Each function takes the store either as a path (opened and closed here) or as an open `Warehouse`, a task
either by name/path or as a loaded `TaskPack`, and run options as a plain mapping (the keys of
`engine.RunConfig`, exactly what `CALL coco_evolve(task, budget, {...})` passes; their types, ranges and defaults
are the tables of `coco_sql.options`). Errors a user can cause are `CocoError`s with one-line messages; nothing is
written for a call that fails before its seed is scored (a new run's row is written with its seed's batch).

    from coco_sql import api
    summary = api.evolve("lockpicking6", db="runs/lp.duckdb", budget=60, options={"seed": 1, "target": 1.0})
    api.resume(summary.run_id, db="runs/lp.duckdb", budget=100)
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from coco_sql.engine import EvolutionLoop, IterationReport, RunConfig, RunSummary
from coco_sql.errors import CandidateRejected, ConfigError, StoreError, TaskError
from coco_sql.evaluate import Evaluator, Outcome
from coco_sql.languages import language_for
from coco_sql.languages.base import ExportRequest, Language
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.mutate import Mutator
from coco_sql.options import RUN_OPTIONS, as_object
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.plugins import kind, open_store
from coco_sql.report import read_models
from coco_sql.report.html import RunReport, render_report
from coco_sql.report.read_models import Champion, CostReport
from coco_sql.search import ParentPolicy
from coco_sql.store import Warehouse
from coco_sql.store.inputs import checked_source
from coco_sql.store.shared_cache import load_cache, save_cache
from coco_sql.tasks import TaskPack, load_task
from coco_sql.tasks.catalog import default_search_paths, discover
from coco_sql.tasks.from_rows import check_options, kind_registrar, task_from_rows

Store = str | Path | Warehouse
Task = str | Path | TaskPack
Progress = Callable[[IterationReport], None]

__all__ = [
    "Champion",
    "CostReport",
    "Evaluation",
    "RunReport",
    "RunSummary",
    "champion_deploy_findings",
    "champion_warnings",
    "check_deploy",
    "cost",
    "evaluate",
    "evolve",
    "export",
    "export_findings",
    "register_task",
    "report",
    "resume",
    "status",
]


@dataclass(frozen=True)
class Evaluation:
    """One program scored on one split."""

    task: str
    split: str
    score: float
    rows: int
    failing_rows: int
    error: str | None
    latency_ms: float
    outcome: Outcome

    def as_dict(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "split": self.split,
            "score": self.score,
            "rows": self.rows,
            "failing_rows": self.failing_rows,
            "error": self.error,
            "latency_ms": round(self.latency_ms, 3),
        }


def evolve(
    task: Task,
    *,
    db: Store,
    budget: int = RUN_OPTIONS.default("budget"),
    options: Mapping[str, Any] | None = None,
    ai: AiConfig | None = None,
    progress: Progress | None = None,
    language: Language | None = None,
    mutator: Mutator | None = None,
    policy: ParentPolicy | None = None,
) -> RunSummary:
    """Start a new run of `task` in `db` and run it to its budget (or its target, or its `max_spend`: then the
    summary's `stopped` says so and the run can be resumed). `options` are RunConfig keys (seed, policy,
    mutator, mutator_settings, islands, targeting, admission, history, target, max_spend, prices, max_cost,
    ...; an option `options` does not set may come from the task pack's `[run]` table); an unknown key is a
    ConfigError. `language`, `mutator` and `policy` replace the registered ones (tests, extensions)."""
    given = {**as_object(options, "the run options"), "budget": budget}
    RunConfig.from_dict(given)  # a bad option is one line before the task is even read
    pack = _resolve_task(task, db)  # before the store is opened for writing: a bad task writes nothing
    if isinstance(task, Path | str) and Path(task).is_dir():  # found again later where it was given
        given.setdefault("task_path", str(pack.root.resolve()))
    # the pack's [run] table, under what was given; the mutator's models must have endpoints before any write
    config = RunConfig.from_dict({**pack.run_defaults, **given})
    for model in config.model_names():
        (ai or AiConfig.from_environment()).route(model)
    with _open(db) as store:
        return _loop(store, pack, ai, progress, language, mutator, policy).start(config)


def resume(
    run_id: int | None = None,
    *,
    db: Store,
    task: Task | None = None,
    budget: int | None = None,
    max_spend: int | str | None = None,
    prices: Mapping[str, Any] | None = None,
    ai: AiConfig | None = None,
    progress: Progress | None = None,
    language: Language | None = None,
    mutator: Mutator | None = None,
    policy: ParentPolicy | None = None,
) -> RunSummary:
    """Continue run `run_id` (default: the latest run of `task`, or of the store) to its budget, or to a larger
    `budget`. `max_spend` replaces the run's spend limit and `prices` add to its prices (a run paused by its
    limit goes on under a larger one). The task pack is reloaded by the run's task name unless `task` is
    given."""
    if budget is not None:  # checked before the store is opened: a bad budget writes nothing
        budget = RUN_OPTIONS["budget"].check(budget)
    if isinstance(db, str | Path) and not Path(db).exists():
        raise StoreError(f"no coco-sql database at {db} to resume")
    with _open(db) as store:
        pack = _task(task, store) if task is not None else None
        if run_id is None:
            run_id = store.latest_run_id(pack.name if pack is not None else None)
            if run_id is None:
                what = f"of task {pack.name!r} " if pack is not None else ""
                raise StoreError(f"no run {what}in {_describe(db)} to resume")
        if pack is None:
            pack = _task(None, store, store.get_run(run_id))
        return _loop(store, pack, ai, progress, language, mutator, policy).resume(
            run_id, budget=budget, max_spend=max_spend, prices=prices
        )


def evaluate(
    task: Task, code: str, split: str = "val", *, ai: AiConfig | None = None, db: Store | None = None
) -> Evaluation:
    """Score one program on one split of `task` (test included: this is a report, not a search). With `db`, a
    task registered there from warehouse rows is found too, and the AI calls read the store's shared cache and
    write what they add to it (`store.shared_cache`); the task's deadline holds for a warm evaluation
    (`evaluate.warm`)."""
    if not isinstance(code, str) or not code.strip():
        raise ConfigError(f"the program to evaluate is SQL or Python text (got {code!r})")
    if not isinstance(split, str):
        raise ConfigError(f"the split is train, val or test (got {split!r})")
    pack = _task(task) if db is None else _resolve_task(task, db)
    language = _language(pack, db) if db is not None and not isinstance(db, str | Path) else None
    local_ai = pack.uses_ai and language is None
    cached = db is not None and local_ai and not (isinstance(db, str | Path) and not Path(db).exists())
    with _open(db) if cached else contextlib.nullcontext() as store:  # type: ignore[arg-type]
        runtime = AiRuntime(ai or AiConfig.from_environment(), load_cache(store) if cached else None)
        evaluator = Evaluator(pack, (split,), ai=runtime if local_ai else None, language=language)
        try:
            outcome = evaluator.evaluate(code, split, warm=True)
        finally:
            evaluator.close()
            runtime.close()
        if cached:
            save_cache(store, runtime.cache)
    return Evaluation(
        task=pack.name,
        split=split,
        score=outcome.score,
        rows=len(outcome.rows),
        failing_rows=int((outcome.scores < 1.0).sum()),
        error=outcome.error,
        latency_ms=outcome.latency_ms,
        outcome=outcome,
    )


def register_task(name: str, source: str | None, options: Mapping[str, Any], *, db: Store) -> dict[str, Any]:
    """Register task `name` over the rows of `source` (a table name or a query in `db`), checked like a pack and
    stored with its rows (`tasks`, `task_rows`). Returns its name, rows and split sizes. Nothing is written, on
    disk or in tables, when the name, the source, the options or the rows are wrong: the name and options are
    checked first (`tasks.from_rows.check_options`), and the source must be one read-only query
    (`store.inputs.checked_source`) before it runs. Option `kind` names a kind with a registrar of its own
    (dbt: several tables, named in its options; `source` is None): that kind checks, reads and stores."""
    registrar = kind_registrar(name, options)
    if registrar is not None:
        checked = registrar.check(name, source, options)
        if isinstance(db, str | Path):  # a Warehouse checks each query itself, in its own dialect
            for text in registrar.queries(checked):
                checked_source(text, SANDBOX_DIALECT)
        _not_a_pack(name)
        with _open(db) as store:
            return registrar.register(name, checked, store)
    options = check_options(name, options)
    test_source = options.get("test_source")
    for text in (source, test_source) if test_source is not None else (source,):
        if isinstance(db, str | Path):  # a Warehouse checks its source itself, in its own dialect
            checked_source(text, SANDBOX_DIALECT)
        elif not isinstance(text, str):
            raise TaskError(f"task {name!r}: the source is a table name or one SELECT query (got {text!r})")
    _not_a_pack(name)
    with _open(db) as store:
        rows, types = store.read_source(source)
        test_rows = store.read_source(test_source)[0] if test_source is not None else None
        pack = task_from_rows(name, source, options, rows, types, test_rows)
        try:
            language_for(pack).validate(pack.seed_program)
        except CandidateRejected as rejection:
            raise TaskError(f"task {name!r}: option 'seed_program' is rejected: {rejection}") from None
        store.register_task(name, source, options, types, rows, test_rows)
    return {"task": name, "rows": len(rows), **{s: len(pack.split(s)) for s in ("train", "val", "test")}}


def _not_a_pack(name: str) -> None:
    """A pack's name means that pack: found by the catalog, without loading every pack (3-4 s)."""
    if name in discover(default_search_paths()):
        raise TaskError(f"task {name!r} is already a task pack on disk; register the rows under another name")


def status(*, db: Store) -> list[dict[str, Any]]:
    """One row per run in the store: run_id, task, seed, budget, status, iterations, best_val."""
    with _open(db, read_only=True) as store:
        return read_models.status(store)


def cost(run_id: int | None = None, *, db: Store) -> CostReport:
    """A run's model spending (default: the latest run): search, report and the mutator apart, the mutator's by
    role, the champion's deploy cost, and the score/cost frontier of its programs (`CostReport.frontier`)."""
    with _open(db, read_only=True) as store:
        return read_models.cost(store, resolve_run(store, run_id, db))


def report(run_id: int | None = None, *, db: Store) -> RunReport:
    """The HTML report of run `run_id` (default: the latest run), one self-contained page (`report.html`). A
    run with nothing committed yet, or not finished, gets a partial page whose `notes` say what is missing."""
    source = str(db) if isinstance(db, str | Path) else ""
    try:
        with _open(db, read_only=True) as store:
            return render_report(store, resolve_run(store, run_id, db), source=source)
    except StoreError as error:
        if "Could not set lock" not in str(error):
            raise
        raise StoreError(
            f"{error} (another process has it open, e.g. a run that is still going: report it once that "
            "process ends)"
        ) from None


def export(
    run_id: int | None = None,
    *,
    db: Store,
    form: str = "sql",
    source: str | None = None,
    max_cost: int | float | str | None = None,
    task: Task | None = None,
    champion: str | None = None,
) -> Champion:
    """The champion of run `run_id` (default: the latest run), its code in `form` (`languages.sql.export.forms`:
    sql, duckdb_view, duckdb_macro, snowflake_view, snowflake_function, dbt). The other forms read `source`
    instead of `input`: by default the table a registered task came from, else `input`. A Snowflake function's
    output column gets the task's contract type when the task is still there. With `max_cost` ('500 calls',
    '20000 tokens', '$0.05' per 1,000 rows), the best program within that deploy cost instead: one lookup on
    the run's score/cost frontier (`read_models.best_within`). A program that reads the training rows as
    `examples` ships them: the other forms create that table first, from the run's task pack (by its name, or
    `task`), which must be the pack the run evolved on; for Snowflake and dbt the rows travel as files
    (`Champion.files`). A form that runs in Snowflake says so at its top when the program's learned proxy was
    fitted on another embedding model than Cortex's (`languages.sql.export.forms.proxy_note`). `champion` ('best' or
    'cheapest_within_se') overrides the run's champion rule (`engine.champion`): 'best' exports the best
    validation score whatever it costs."""
    with _open(db, read_only=True) as store:
        run_id = resolve_run(store, run_id, db)
        chosen = (
            read_models.champion(store, run_id, champion)
            if max_cost is None
            else read_models.best_within(store, run_id, max_cost)
        )
        if form == "sql":
            return chosen
        exporter = kind(chosen.language).exports
        if exporter is None:
            raise ConfigError(
                f"form {form!r} does not export {chosen.language} programs (run {run_id} evolved "
                f"{chosen.language}): export it as 'sql', the program as written"
            )
        run = store.get_run(run_id)
        name = run.task
        registered = store.registered_task(name)
        if source is None:
            source = (
                registered.source if registered is not None and _is_table_name(registered.source) else "input"
            )
        local = store.candidate_engine() is None  # candidates ran here, AI models answered by local stand-ins
        request = ExportRequest(
            code=chosen.code,
            dialect=chosen.dialect,
            form=form,
            name=f"coco_{name}_champion",
            source=source,
            task=lambda: _task(task or None, store, run),
            fingerprint=run.task_fingerprint,
            run_id=run_id,
            source_types=dict(registered.types) if registered is not None else None,
            aliases=dict(run.config.get("model_aliases") or {}) if local else {},
        )
        exported = exporter.export(request)
    return replace(chosen, code=exported.code, files=exported.files)


def champion_warnings(run_id: int | None = None, *, db: Store) -> list[str]:
    """One-line warnings about the champion a user would deploy (default: the latest run's); empty when none
    (`read_models.champion_warnings`: a cheaper program as good, SQL over 8 KB).

    Why here and not in the loop: they are properties of the exported program, checked once at the end of
    `evolve`/`resume` by their callers (the CLI prints these lines and puts them in its JSON summary)."""
    with _open(db, read_only=True) as store:
        return read_models.champion_warnings(store, resolve_run(store, run_id, db))


def check_deploy(
    run_id: int | None = None, *, db: Store, code: str | None = None, task: Task | None = None
) -> list[Any]:
    """Why a program would not run in Snowflake: every function, argument name and type it uses that Snowflake
    does not have (the kind's `Exporter.check_deploy`, through the deploy engine's `EnginePlugin.check_deploy`); empty when it would. The program is `code`, written for `task` (its
    dialect, columns and AI functions), or else the champion of run `run_id` (default: the latest run)."""
    if code is not None:
        if task is None:
            raise ConfigError("check_deploy(code=...) needs the task the program is written for")
        if isinstance(task, str) and (
            not isinstance(db, str | Path) or Path(db).is_file()
        ):  # registered there
            with _open(db, read_only=True) as store:
                return _check_deploy(code, _task(task, store), "program")
        return _check_deploy(code, _task(task), "program")
    with _open(db, read_only=True) as store:
        champion = read_models.champion(store, resolve_run(store, run_id, db))
    return export_findings(champion, db=db)


def export_findings(program: Champion, form: str = "snowflake_view", *, db: Store) -> list[Any]:
    """`check_deploy`'s findings for an exported `program` (a champion, or the best within a cost) when `form`
    runs in Snowflake (or is its SQL as written, in Snowflake dialect); empty for other forms and for Python.
    An export is never refused for them: the caller shows them next to the code. The program is checked as the
    store holds it, as check-deploy checks it, never the export's text (issue 26: `CREATE VIEW is not allowed`,
    `expected exactly one statement, got 2` came from checking the view)."""
    exporter = kind(program.language).exports
    if exporter is None or not exporter.deploy_checked(form, program.dialect):
        return []
    with _open(db, read_only=True) as store:
        program = replace(program, code=store.program(program.program_id).code)  # never the export's text
        try:
            pack: TaskPack | None = _task(None, store, store.get_run(program.run_id))
        except TaskError:
            pack = None  # the task is gone: functions, names and types are still checked
    where = f"program {program.program_id} of run {program.run_id}"
    return exporter.check_deploy(program.code, program.dialect, pack, where)


def champion_deploy_findings(run_id: int, *, db: Store) -> list[Any]:
    """`export_findings` of run `run_id`'s champion as written, for `coco-sql status`: a Snowflake-dialect
    champion that would not run in Snowflake is flagged there. Empty when the run has no champion yet."""
    try:
        champion = export(run_id, db=db)
    except StoreError:
        return []
    return export_findings(champion, "sql", db=db)


def _check_deploy(code: str, pack: TaskPack, where: str) -> list[Any]:
    exporter = kind(pack.language).exports
    if exporter is None:
        raise ConfigError(f"check-deploy checks SQL programs; task {pack.name!r} evolves {pack.language}")
    return exporter.check_deploy(code, pack.dialect, pack, where)


def resolve_run(store: Warehouse, run_id: int | None, db: Store = "the store") -> int:
    """`run_id`, or the newest run; StoreError when there is none or it does not exist."""
    resolved = run_id if run_id is not None else store.latest_run_id()
    if resolved is None:
        raise StoreError(f"no runs in {_describe(db)}")
    store.get_run(resolved)
    return resolved


# -- internals -----------------------------------------------------------------------------------------------
def _task(task: Task | None, store: Warehouse | None = None, run: Any = None) -> TaskPack:
    """A loaded task: as given, a pack on disk, or (a name no pack has) one registered in `store`; a `run`'s task
    when it has no pack by its name: the folder it was started from (runs.config task_path)."""
    if run is not None and task is None:
        task, path = run.task, (run.config or {}).get("task_path")
        if path and Path(path, "task.toml").is_file():
            return load_task(Path(path))
    if isinstance(task, TaskPack):
        return task
    if not isinstance(task, str | Path) or not str(task):
        raise ConfigError(f"a task is a pack name or directory, got {task!r}")
    try:
        return load_task(task)
    except TaskError:
        registered = store.registered_task(task) if store is not None and isinstance(task, str) else None
        if registered is None:
            raise
    registrar = kind_registrar(task, registered.options)
    if registrar is not None:
        return registrar.load(str(task), registered)
    return task_from_rows(
        str(task),
        registered.source,
        registered.options,
        registered.rows,
        registered.types,
        registered.test_rows,
    )


def _loop(
    store: Warehouse,
    pack: TaskPack,
    ai: AiConfig | None,
    progress: Progress | None,
    language: Language | None,
    mutator: Mutator | None,
    policy: ParentPolicy | None,
) -> EvolutionLoop:
    return EvolutionLoop(
        store,
        pack,
        policy=policy,
        mutator=mutator,
        progress=progress,
        ai_config=ai,
        language=language or _language(pack, store),
    )


def _language(pack: TaskPack, store: Warehouse) -> Language | None:
    """The task's language bound to the store's own engine when the store runs candidates itself (Snowflake:
    SQL as its queries, Python as its UDFs); None (the registered language, over the local sandboxes)
    otherwise."""
    engine = store.candidate_engine()
    return language_for(pack, engine) if engine is not None else None


def _is_table_name(source: str) -> bool:
    return re.fullmatch(r"[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*){0,2}", source.strip()) is not None


def _resolve_task(task: Task, db: Store) -> TaskPack:
    """`_task` with the store at `db` opened only when the name is not a pack, read-only, and only if it exists:
    looking a task up never creates or locks a database."""
    if not isinstance(db, str | Path):
        return _task(task, db)
    try:
        return _task(task)
    except TaskError:
        if not (isinstance(task, str) and Path(db).exists()):
            raise
    with _open(db, read_only=True) as store:
        return _task(task, store)


@contextlib.contextmanager
def _open(db: Store, *, read_only: bool = False) -> Iterator[Warehouse]:
    if isinstance(db, str | Path):
        with contextlib.closing(open_store(db, read_only=read_only)) as store:
            yield store
    else:
        yield db


def _describe(db: Store) -> str:
    return str(db) if isinstance(db, str | Path) else "the store"
