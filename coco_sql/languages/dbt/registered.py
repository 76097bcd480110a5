"""A dbt task registered from the user's own tables: `CALL coco_task('shop', NULL, {'kind': 'dbt', ...})`.

What a pack's task.toml says in its tables, the options say (`dbt.options.TASK_OPTIONS`, printed by
`CALL coco_help('coco_task dbt')`)::

    CALL coco_task('shop', NULL, {
      'kind': 'dbt',
      'sources': {'shop.customers': 'customers', 'shop.orders': 'SELECT * FROM orders WHERE NOT test'},
      'targets': {'customer_totals': {'expected': 'expected_totals', 'key': 'customer_id',
                                      'tolerance': {'total': 0.005}}},
      'entity': 'shop.customers.id', 'follow': ['shop.orders.customer_id -> shop.customers.id'],
      'seed_program': '-- file: dbt_project.yml ...'});

The second argument is NULL: a dbt task reads several tables, each named in `sources` as the models'
``source('shop', 'customers')`` reads it, and one expected table (or query) per target model in `targets`. Each
is one read-only query, checked by `store.inputs.checked_source` before it runs (`Warehouse.read_source`).

The task is then built by the pack loader's own code (`task.assemble_dbt_task`), from a task.toml document made
of the options and read through a `Reader` whose messages name the option: every check a pack gets (split
entity and follow rules, a target's key present and unique, compared columns, tolerances), a registered task
gets, in one line each. The seed project is validated in this process (`validate.validate_project`: no dbt
sandbox, so a stored procedure can register a task). Nothing is written until all of that passed.

What is stored (`Warehouse.register_task`, the tables `tasks` and `task_rows`: rows in the store, never files,
so a run resumes from them): the options as checked, plus each table's columns and types (`_tables`, in order),
and every table's rows as `(table, row)` pairs, the row a JSON object made by DuckDB's `to_json` after casting
each column to its type. Reading a task back casts each row with `json_transform_strict` to the same types and
builds the task the same way; the task built at registration is built from the same stored form, so it is the
task every later load gives (its fingerprint: a hash of the checked options and the stored rows).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from coco_sql.errors import CandidateRejected, StoreError, TaskError
from coco_sql.languages.dbt.compare import _value
from coco_sql.languages.dbt.options import TASK_OPTIONS as DBT_TASK_OPTIONS
from coco_sql.languages.dbt.project import DbtProject, without_dbt_files
from coco_sql.languages.dbt.task import DbtTables, assemble_dbt_task, check_source_name
from coco_sql.options import as_object, check_task_name
from coco_sql.tasks.pack_files import Reader

ROOT = Path("coco-task-registered")  # a registered task's `root` (`engine.start` reads `coco-task-*` as one)
TYPES = {"table": "VARCHAR", "row": "VARCHAR"}  # the stored frame's columns
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TARGET_KEYS = ("expected", "key", "columns", "tolerance", "key_of", "split_by", "weight")
_OPTION_OF = {
    "splits.entity": "entity", "splits.follow": "follow", "splits.train_fraction": "train_fraction",
    "splits.test_fraction": "test_fraction", "splits.seed": "split_seed", "program.allowed_functions":
    "allowed_functions", "program.timeout_seconds": "timeout_seconds", "data_tests.mode": "data_tests",
    "program.seed": "seed_program",
}  # fmt: skip


class _OptionReader(Reader):
    """The loader's `Reader`, its messages naming the option a user wrote instead of a task.toml key."""

    def __init__(self, name: str, models: Sequence[str]) -> None:
        self.path = ROOT / name / "task.toml"
        self.file = f"task {name!r}"
        self._models = list(models)

    def error(self, key: str, problem: str) -> TaskError:
        return TaskError(f"{self.file}: option {self.option(key)!r}: {problem}")

    def option(self, key: str) -> str:
        found = re.fullmatch(r"targets\[(\d+)\](?:\.(.+))?", key)
        if found is not None and int(found.group(1)) < len(self._models):
            return ".".join(filter(None, ("targets", self._models[int(found.group(1))], found.group(2))))
        return _OPTION_OF.get(key, key)


def check(name: object, source: object, options: object, *, stored: bool = False) -> dict[str, Any]:
    """The options of a dbt task, checked and in canonical form (sources and targets sorted, tolerances as
    floats), before anything is read or written; a one-line TaskError else."""
    check_task_name(name, error=TaskError, stored=stored)
    where = f"task {name!r}: "
    given = dict(as_object(options, f"task {name!r}: the options", error=TaskError))
    folder = given.pop("project", None)  # instead of seed_program: a folder, read as it stands (issue 39)
    checked = DBT_TASK_OPTIONS.check(given, error=TaskError, prefix=where)
    if folder is not None and not isinstance(folder, str):
        raise TaskError(f"{where}option 'project' must be a folder's path (got {folder!r})")
    if folder is not None:  # the project as it stands in a folder: read here, stored as text
        if checked.get("seed_program"):
            raise TaskError(f"{where}give option 'project' or option 'seed_program', not both")
        try:
            checked["seed_program"] = DbtProject.from_dir(Path(folder)).to_text()
        except (CandidateRejected, OSError) as error:
            raise TaskError(f"{where}option 'project': {folder}: {error}") from None
    if isinstance(checked.get("seed_program"), str):
        checked["seed_program"] = without_dbt_files(checked["seed_program"])
    for required in ("kind", "sources", "targets", "seed_program", "entity"):
        if not checked.get(required):
            raise TaskError(f"{where}option {required!r} is required ({DBT_TASK_OPTIONS[required].doc})")
    if source is not None and not (isinstance(source, str) and not source.strip()):
        raise TaskError(
            f"{where}a dbt task reads the tables of option 'sources': pass NULL as coco_task's source "
            f"(got {str(source)[:60]!r})"
        )
    reader = _OptionReader(str(name), [])
    sources = {}
    for key, query in sorted(checked["sources"].items()):
        check_source_name(reader, f"sources.{key}", key)
        sources[key] = _query(where, f"sources.{key}", query)
    checked["sources"] = sources
    checked["targets"] = {
        model: _target(where, model, spec) for model, spec in sorted(checked["targets"].items())
    }
    description = checked.get("description")
    if description is not None and (not description.strip() or "\n" in description.strip()):
        raise TaskError(f"{where}option 'description' must be a single non-empty line")
    try:
        DbtProject.from_text(checked["seed_program"])
    except CandidateRejected as error:
        raise TaskError(f"{where}option 'seed_program': {error}") from None
    return checked


def _query(where: str, option: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TaskError(f"{where}option {option!r} must be a table name or one SELECT query (got {value!r})")
    return value


def _target(where: str, model: str, spec: object) -> dict[str, Any]:
    """One target's options: {'expected': ..., 'key': ..., 'columns': [...], 'tolerance': {...}, 'key_of': ...}."""
    at = f"targets.{model}"
    if not _IDENTIFIER.fullmatch(model):
        raise TaskError(f"{where}option 'targets': {model!r} is not a model name (letters, digits, _)")
    if not isinstance(spec, Mapping):
        raise TaskError(
            f"{where}option {at!r} must be an object such as {{'expected': 'table', 'key': 'id'}}"
        )
    unknown = sorted(str(k) for k in spec if k not in _TARGET_KEYS)
    if unknown:
        raise TaskError(f"{where}option {at!r}: unknown key {unknown[0]!r} (keys: {', '.join(_TARGET_KEYS)})")
    target: dict[str, Any] = {"expected": _query(where, f"{at}.expected", spec.get("expected"))}
    for key in ("key", "key_of", "split_by"):
        value = spec.get(key)
        if (
            key == "key"
            and isinstance(value, list)
            and value
            and all(isinstance(v, str) and v for v in value)
        ):
            target[key] = list(value)  # a key of several columns
        elif value is not None or key == "key":
            if not isinstance(value, str) or not value:
                raise TaskError(f"{where}option '{at}.{key}' must be a column name (got {value!r})")
            target[key] = value
    weight = spec.get("weight")
    if weight is not None:
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1000:
            raise TaskError(f"{where}option '{at}.weight' must be a number in (0, 1000] (got {weight!r})")
        target["weight"] = float(weight)
    columns = spec.get("columns")
    if columns is not None:
        if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
            raise TaskError(f"{where}option '{at}.columns' must be a list of column names (got {columns!r})")
        target["columns"] = list(columns)
    tolerance = {}
    for column, value in as_object(
        spec.get("tolerance"), f"{where}option '{at}.tolerance'", error=TaskError
    ).items():
        bounds = (
            {"abs_tol": value} if isinstance(value, int | float) and not isinstance(value, bool) else value
        )
        if (
            not isinstance(bounds, Mapping)
            or set(bounds) - {"abs_tol", "rel_tol"}
            or not all(
                isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in bounds.values()
            )
        ):
            raise TaskError(
                f"{where}option '{at}.tolerance.{column}' must be a number (an absolute tolerance) or "
                f"{{'abs_tol': x, 'rel_tol': y}} (got {value!r})"
            )
        tolerance[str(column)] = {k: float(v) for k, v in sorted(bounds.items())}
    if tolerance:
        target["tolerance"] = tolerance
    return target


def queries(checked: Mapping[str, Any]) -> list[str]:
    """Every query a registration reads: the sources, then each target's expected table."""
    return [*checked["sources"].values(), *(t["expected"] for t in checked["targets"].values())]


def register(name: str, checked: Mapping[str, Any], store: Any) -> dict[str, Any]:
    """Read the tables, build and check the task, validate its seed, then store it (module docstring); the
    coco_task row (task, rows, train, val, test)."""
    from coco_sql.languages.dbt.validate import validate_project

    read = {
        f"source:{key}": _read(name, f"sources.{key}", query, store)
        for key, query in checked["sources"].items()
    }
    for model, target in checked["targets"].items():
        read[f"expected:{model}"] = _read(name, f"targets.{model}.expected", target["expected"], store)
    tables = [(key, list(types.items())) for key, (_, types) in read.items()]
    options = {**checked, "_tables": tables}
    rows = pd.DataFrame(
        [(key, row) for key, (frame, types) in read.items() for row in _encoded(name, key, frame, types)],
        columns=list(TYPES),
    )
    pack = load(name, options, rows)
    try:
        validate_project(pack.seed_program, pack.kind_data.spec)
    except CandidateRejected as rejection:
        raise TaskError(f"task {name!r}: option 'seed_program' is rejected: {rejection}") from None
    store.register_task(name, json.dumps(checked["sources"]), options, TYPES, rows)
    sizes = {split: len(pack.split(split)) for split in ("train", "val", "test")}
    data = pack.kind_data  # each split holds every test instance and each target's extra-rows instance
    instances = sum(sizes.values()) - 2 * len(data.tests) - len(sizes) * len(data.targets)
    return {"task": name, "rows": instances, **sizes}


def _read(name: str, option: str, query: str, store: Any) -> tuple[pd.DataFrame, dict[str, str]]:
    """A table's rows and column types (`Warehouse.read_source`, which checks the query first), its error
    naming the option."""
    try:
        return store.read_source(query)  # type: ignore[no-any-return]
    except StoreError as error:
        raise TaskError(f"task {name!r}: option {option!r}: {error}") from None


def load(name: str, options: Mapping[str, Any], rows: pd.DataFrame) -> Any:
    """The TaskPack of a registered dbt task from what `register` stored (its options and `(table, row)` rows)."""
    stored = dict(options)
    tables = [
        (str(key), [(str(c), str(t)) for c, t in columns]) for key, columns in stored.pop("_tables", [])
    ]
    checked = check(name, None, stored, stored=True)
    frames = _decoded(rows, tables)
    digest = hashlib.sha256(json.dumps([checked, tables], sort_keys=True).encode())
    for table, row in zip(rows["table"], rows["row"], strict=True):
        digest.update(f"{len(table)}:{table}{len(row)}:{row}".encode())
    return _pack(name, checked, frames, dict(tables), digest.hexdigest())


def _encoded(name: str, key: str, frame: pd.DataFrame, types: Mapping[str, str]) -> list[str]:
    """Each row of `frame` as a JSON object, every column cast to its type first (DuckDB's `to_json`)."""
    columns = ", ".join(f"CAST({_quoted(c)} AS {t}) AS {_quoted(c)}" for c, t in types.items())
    try:
        with closing(duckdb.connect(":memory:")) as con:
            con.register("_coco_rows", frame[list(types)])
            return [
                r[0]
                for r in con.execute(
                    f"SELECT to_json(t) FROM (SELECT {columns} FROM _coco_rows) t"
                ).fetchall()
            ]
    except duckdb.Error as error:
        what = key.split(":", 1)[1]
        raise TaskError(
            f"task {name!r}: the rows of {what} cannot be stored: {str(error).splitlines()[0]}"
        ) from None


def _decoded(
    rows: pd.DataFrame, tables: Sequence[tuple[str, Sequence[tuple[str, str]]]]
) -> dict[str, pd.DataFrame]:
    """Each stored table's rows, typed as registered (the inverse of `_encoded`)."""
    frames = {}
    with closing(duckdb.connect(":memory:")) as con:
        for key, columns in tables:
            part = pd.DataFrame(
                {"row": pd.Series(rows["row"][rows["table"] == key].tolist(), dtype="string")}
            )
            structure = json.dumps(dict(columns)).replace("'", "''")
            con.register("_coco_stored", part)
            frames[key] = con.execute(
                f"SELECT s.* FROM (SELECT json_transform_strict(row, '{structure}') AS s FROM _coco_stored) t"
            ).df()
            con.unregister("_coco_stored")
    return frames


def _pack(name: str, checked: Mapping[str, Any], frames: Mapping[str, pd.DataFrame],
          types: Mapping[str, Sequence[tuple[str, str]]], fingerprint: str) -> Any:  # fmt: skip
    """The task.toml document the options make, built by the pack loader's code (module docstring)."""
    models = list(checked["targets"])
    expected = []
    targets = []
    for model, target in checked["targets"].items():
        frame = frames[f"expected:{model}"]
        expected.append((frame, _short(target["expected"])))
        keys = target["key"] if isinstance(target["key"], list) else [target["key"]]
        columns = target.get("columns") or [c for c in frame.columns if c not in keys]
        entry = {
            "model": model,
            "key": target["key"],
            "columns": columns,
            "tolerance": target.get("tolerance", {}),
        }
        targets.append(entry | {k: target[k] for k in ("key_of", "split_by", "weight") if k in target})
    sources = list(checked["sources"])
    doc = {
        "name": name,
        "description": checked.get("description") or f"a dbt project over {', '.join(sources)}",
        "dialect": checked.get("dialect", DBT_TASK_OPTIONS.default("dialect")),
        "program": {
            "allowed_functions": checked.get("allowed_functions") or [],
            "timeout_seconds": checked.get("timeout_seconds", DBT_TASK_OPTIONS.default("timeout_seconds")),
        },
        "splits": {
            "seed": checked.get("split_seed", DBT_TASK_OPTIONS.default("split_seed")),
            "train_fraction": checked.get("train_fraction", DBT_TASK_OPTIONS.default("train_fraction")),
            "test_fraction": checked.get("test_fraction", DBT_TASK_OPTIONS.default("test_fraction")),
            "entity": checked["entity"],
            "follow": checked.get("follow") or [],
        },
        "targets": targets,
        "data_tests": {"mode": checked.get("data_tests", DBT_TASK_OPTIONS.default("data_tests"))},
        "source": {"name": ", ".join(f"{k} = {_short(v)}" for k, v in checked["sources"].items())},
    }
    tables = {key: frames[f"source:{key}"] for key in sources}
    columns = {tuple(key.split(".")): dict(types[f"source:{key}"]) for key in sources}
    read = DbtTables(DbtProject.from_text(checked["seed_program"]), tables, columns, expected)  # type: ignore[arg-type]
    return assemble_dbt_task(
        _OptionReader(name, models), doc, read, root=ROOT / name, fingerprint=fingerprint, key_text=key_text
    )


def key_text(value: Any) -> str:
    """A key as an instance id holds it: as the runners read a target row's key (`language.instance_outputs`)."""
    return str(_value(value)).removesuffix(".0")


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def _short(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= 60 else flat[:57] + "..."
