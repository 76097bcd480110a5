"""`coco-sql init dbt PROJECT_DIR`: a dbt project folder as it stands, made into a task.

- **seed**: the project itself (its models, macros and packages, read where they are; nothing is copied);
- **sources**: the tables its ``source()`` calls read, from the project's DuckDB file (the profile's, or
  `data`), and its seeds (``ref('x')`` of a seed reads the task source ``dbt_seeds.x``);
- **targets**: models with expected rows in `expected` (a "golden" DuckDB file, a folder of CSV or Parquet files
  named after the models, or one such file); by default the models found there that no other found model reads;
- **keys, entity, splits**: given, or inferred and said so (`init_infer`);
- the task folder (default ``PROJECT_DIR/.coco/<name>/``: every command then finds it by the project's path)
  holds task.toml and the rows as Parquet; it is loaded back through the pack loader and the seed is scored on
  every split, and `InitReport.lines` says in one screen what was found, what was refused and why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pandas as pd

from coco_sql.errors import CocoError, TaskError
from coco_sql.languages.dbt.init_infer import choose_split, infer_key
from coco_sql.languages.dbt.init_scan import SEED_SOURCE, ProjectScan, scan
from coco_sql.plugin_loader import SANDBOX_DIALECT

MADE = ".coco"


@dataclass(frozen=True)
class InitOptions:
    project: Path
    out: Path | None = None
    expected: Path | None = None
    data: Path | None = None
    targets: tuple[str, ...] = ()  # "model" or "model:col1,col2"
    entity: str | None = None  # "source.table.column"
    name: str | None = None
    force: bool = False
    score: bool = True  # score the seed on every split (starts dbt)


@dataclass
class InitReport:
    task: str
    out: Path
    lines: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    scores: dict[str, float] = field(default_factory=dict)


def init_dbt(options: InitOptions) -> InitReport:
    """Make the task (module docstring); TaskError (one line) when there is nothing to make one from."""
    project = scan(options.project)
    name = _task_name(options.name or project.name)
    out = options.out or options.project / MADE / name
    if (out / "task.toml").exists() and not options.force:
        raise TaskError(f"{out}: already holds a task (use --force to replace it)")
    report = InitReport(name, out)
    pieces = project.project
    report.lines.append(
        f"project {project.name!r} at {options.project}: {len(pieces.models())} models, "
        f"{len(pieces.paths('macros/'))} macro files, {len(project.seeds)} seeds, "
        f"packages: {', '.join(project.packages) or 'none'}"
    )
    tables = _sources(project, options, report)
    expected = _expected(project, options, report)
    keys, splits = _targets(project, options, expected, tables, report)
    for made in ("data", "expected"):  # what a task made here before wrote (nothing else is removed)
        shutil.rmtree(out / made, ignore_errors=True)
    _write(project, options, out, name, tables, expected, keys, splits)
    report.lines.append(f"task {name!r} written to {out}")
    if options.score:
        _score(out, report)
    return report


def _task_name(text: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_").lower() or "dbt_project"
    return name if name[0].isalpha() else f"p_{name}"


def _frame(con: duckdb.DuckDBPyConnection, sql: str, parameters: list[object] | None = None) -> pd.DataFrame:
    return con.execute(sql, parameters or []).df()


# an expected CSV's cells as written: no BOOLEAN guess, so a model's 't'/'f' text is not compared with true/false
# (a boolean output still agrees with a 'true'/'false' cell: compare reads both as the same text)
_EXPECTED_CSV = "read_csv(?, header = true, auto_type_candidates = ['BIGINT', 'DOUBLE', 'TIME', 'DATE', 'TIMESTAMP', 'VARCHAR'])"


def _sources(
    project: ProjectScan, options: InitOptions, report: InitReport
) -> dict[str, tuple[pd.DataFrame, dict]]:
    """ "source.table" -> (rows, DuckDB column types) of every source a model reads and every seed."""
    read: dict[str, tuple[pd.DataFrame, dict]] = {}
    database = options.data or project.database
    needed = set().union(*project.reads.values()) if project.reads else set()
    with duckdb.connect(":memory:") as con:
        for seed, path in project.seeds.items():
            frame = _frame(con, "SELECT * FROM read_csv(?, header = true)", [str(path)])
            read[f"{SEED_SOURCE}.{seed}"] = (frame, _types(con, frame))
            report.lines.append(f"source {SEED_SOURCE}.{seed}: {len(frame)} rows from seed {path.name}")
        if database is not None:
            con.execute(f"ATTACH '{database.as_posix()}' AS data (READ_ONLY)")
        for declared in project.sources:
            key = f"{declared.source}.{declared.table}"
            if key not in needed:
                continue
            if database is None:
                report.refused.append(
                    f"source {key}: no DuckDB file to read it from (the profile names none; give --data)"
                )
                continue
            found = con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE table_catalog = 'data' "
                "AND lower(table_name) = lower(?) ORDER BY lower(table_schema) = lower(?) DESC",
                [declared.identifier, declared.schema],
            ).fetchone()
            if found is None:
                report.refused.append(f"source {key}: no table {declared.identifier} in {database}")
                continue
            frame = _frame(con, f'SELECT * FROM data."{found[0]}"."{found[1]}"')
            read[key] = (frame, _types(con, frame))
            report.lines.append(f"source {key}: {len(frame)} rows from {database.name} {found[0]}.{found[1]}")
    return read


def _types(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame) -> dict[str, str]:
    con.register("_coco_init", frame)
    types = {str(r[0]): str(r[1]) for r in con.execute("DESCRIBE _coco_init").fetchall()}
    con.unregister("_coco_init")
    return types


def _expected(project: ProjectScan, options: InitOptions, report: InitReport) -> dict[str, pd.DataFrame]:
    """model -> expected rows, for every model of the project found in `options.expected`."""
    given = options.expected
    if given is None:
        raise TaskError(
            "init dbt needs --expected: a golden DuckDB file, or CSV / Parquet files of the models' rows"
        )
    models = set(project.project.models())
    found: dict[str, pd.DataFrame] = {}
    with duckdb.connect(":memory:") as con:
        if given.is_file() and given.suffix in (".duckdb", ".db"):
            con.execute(f"ATTACH '{given.as_posix()}' AS golden (READ_ONLY)")
            for schema, table in con.execute(
                "SELECT table_schema, table_name FROM information_schema.tables WHERE table_catalog = 'golden' "
                "ORDER BY table_schema = 'main' DESC"
            ).fetchall():
                if table in models and table not in found:
                    found[table] = _frame(con, f'SELECT * FROM golden."{schema}"."{table}"')
        else:
            files = sorted(given.glob("*")) if given.is_dir() else [given]
            for path in files:
                if path.stem in models and path.suffix in (".csv", ".parquet"):
                    reader = "read_parquet(?)" if path.suffix == ".parquet" else _EXPECTED_CSV
                    found[path.stem] = _frame(con, f"SELECT * FROM {reader}", [str(path)])
    if not found:
        raise TaskError(
            f"{given}: holds no rows named after a model of the project ({', '.join(sorted(models))})"
        )
    report.lines.append(f"expected rows of {len(found)} models from {given}")
    return found


def _targets(project: ProjectScan, options: InitOptions, expected: dict[str, pd.DataFrame],
             tables: dict[str, tuple[pd.DataFrame, dict]], report: InitReport):  # type: ignore[no-untyped-def]  # fmt: skip
    given = dict(t.split(":", 1) if ":" in t else (t, "") for t in options.targets)
    for model in given:
        if model not in expected:
            raise TaskError(f"--target {model}: no expected rows for it in {options.expected}")
    chosen = list(given) or sorted(
        m for m in expected if not any(m in project.upstream(o) - {o} for o in expected)
    )
    keys: dict[str, tuple[str, ...]] = {}
    for model in chosen:
        frame = expected[model]
        if given.get(model):
            keys[model] = tuple(given[model].split(","))
            how = "given"
        else:
            try:
                keys[model], how = infer_key(frame, project.unique.get(model, []))
            except ValueError as error:
                report.refused.append(f"target {model}: {error}")
                continue
        report.lines.append(f"target {model}: {len(frame)} rows, key {' + '.join(keys[model])} ({how})")
    frames = {t: f for t, (f, _) in tables.items()}
    try:
        split = choose_split(
            frames, {m: expected[m] for m in keys}, keys, project.relationships, options.entity
        )
    except ValueError as error:
        raise TaskError(f"init dbt: {error}") from None
    for model in list(keys):
        if model in split.assigned:
            continue
        reads = project.sources_of(model) & split.cut
        if reads:
            report.refused.append(f"target {model}: its rows cannot be split by {split.entity} (it aggregates "
                                  f"over {', '.join(sorted(reads))}, which the splits cut)")  # fmt: skip
            del keys[model]
    if not keys:
        raise TaskError("init dbt: no target left to score (see the refusals above)")
    report.lines.append(
        f"splits: entity {split.entity}"
        + (f", followed by {'; '.join(split.follow)}" if split.follow else "")
    )
    return keys, split


def _write(project: ProjectScan, options: InitOptions, out: Path, name: str, tables, expected, keys, split) -> None:  # type: ignore[no-untyped-def]  # fmt: skip
    (out / "data").mkdir(parents=True, exist_ok=True)
    (out / "expected").mkdir(parents=True, exist_ok=True)
    lines = [f"name = {json.dumps(name)}",
             f"description = {json.dumps(f'dbt project {project.name} (coco-sql init dbt)')}",
             'language = "dbt"', f'dialect = "{SANDBOX_DIALECT}"', "",
             "[program]", f"seed = {json.dumps(Path(os.path.relpath(options.project, out)).as_posix())}",
             "timeout_seconds = 120.0", ""]  # fmt: skip
    with duckdb.connect(":memory:") as con:
        for key, (frame, types) in sorted(tables.items()):
            path = f"data/{key}.parquet"
            _parquet(con, frame, out / path)
            columns = ", ".join(f"{json.dumps(c)} = {json.dumps(t)}" for c, t in types.items())
            lines += ["[[sources]]", f"name = {json.dumps(key)}", f"file = {json.dumps(path)}",
                      f"columns = {{ {columns} }}", ""]  # fmt: skip
        lines += ["[splits]", "seed = 0", "train_fraction = 0.5", "test_fraction = 0.25",
                  f"entity = {json.dumps(split.entity)}", f"follow = {json.dumps(list(split.follow))}", ""]  # fmt: skip
        for model, key in sorted(keys.items()):
            frame = expected[model]
            path = f"expected/{model}.parquet"
            _parquet(con, frame, out / path)
            columns = [c for c in frame.columns if c not in key]
            floats = [c for c in columns if pd.api.types.is_float_dtype(frame[c])]
            lines += ["[[targets]]", f"model = {json.dumps(model)}", f"key = {json.dumps(list(key))}",
                      f"expected = {json.dumps(path)}", f"columns = {json.dumps(columns)}"]  # fmt: skip
            if model in split.assigned:
                split_by, key_of = split.assigned[model]
                lines += [f"split_by = {json.dumps(split_by)}", f"key_of = {json.dumps(key_of)}"]
            else:  # it reads no table the splits cut: its own keys are partitioned
                lines.append('split = "keys"')
            if floats:
                tolerance = ", ".join(
                    f"{json.dumps(c)} = {{ abs_tol = 1e-06, rel_tol = 1e-09 }}" for c in floats
                )
                lines.append(f"tolerance = {{ {tolerance} }}")
            lines.append("")
    lines += ["[data_tests]", 'mode = "score"', "weight = 0.1", "", "[source]",
              f"name = {json.dumps(project.name)}", f"notes = {json.dumps('made by coco-sql init dbt')}"]  # fmt: skip
    (out / "task.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _parquet(con: duckdb.DuckDBPyConnection, frame: pd.DataFrame, path: Path) -> None:
    con.register("_coco_out", frame)
    con.execute(f"COPY (SELECT * FROM _coco_out) TO '{path.as_posix()}' (FORMAT parquet)")
    con.unregister("_coco_out")


def _score(out: Path, report: InitReport) -> None:
    """Load the task back (every check of the pack loader) and score the seed on every split."""
    from coco_sql.errors import CandidateRejected
    from coco_sql.evaluate.evaluator import Evaluator
    from coco_sql.tasks import load_task

    pack = load_task(out)
    data = pack.kind_data
    report.lines += [f"  {line}" for line in data.cuts]
    sizes = ", ".join(f"{s} {len(pack.split(s))}" for s in ("train", "val", "test"))
    report.lines.append(f"instances: {sizes} ({len(data.tests)} data tests on the models the targets read)")
    evaluator = Evaluator(pack, ("train", "val", "test"))
    try:
        evaluator.check(pack.seed_program)
        for split in ("train", "val", "test"):
            outcome = evaluator.evaluate(pack.seed_program, split)
            report.scores[split] = outcome.score
            if outcome.error:
                report.refused.append(f"seed on {split}: {outcome.error}")
    except CandidateRejected as error:
        report.refused.append(f"seed refused: {error}")
    except CocoError as error:
        report.refused.append(f"seed not scored: {error}")
    finally:
        evaluator.close()
    if report.scores:
        report.lines.append("seed scores: " + ", ".join(f"{s} {v:.3f}" for s, v in report.scores.items()))
