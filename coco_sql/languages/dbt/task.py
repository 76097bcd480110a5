"""A dbt task pack: its sources, targets and splits, read from task.toml (`tasks.loader` hands a pack whose
`language = "dbt"` to `load_dbt_pack`).

The instances of a dbt task are its expected rows, one per target key (id ``model:key``), and the seed
project's data tests (id ``test:KIND:MODEL.COLUMN``). A row instance's expected value is the JSON of its
compared columns; the program's output for it is the JSON of the row it produced (`language.DbtRunner`), and
`RowScorer` scores 1 when every column agrees within the task's tolerance. A test instance expects ``pass``.

Splits partition the `[splits] entity` column's values; each split's copy of the sources holds the entity rows
of its own partition and, following `follow` (``child.col -> parent.col``), only the rows that reference them.
A target key belongs to a split when its value is in that split's `key_of` column (default: the entity).
So each split's dbt run sees its own sources only, and the mutator's evaluations see only train rows.

task.toml keys (besides name, description, language, dialect, [source])::

    [program]  seed = "seed" (a folder), allowed_functions, timeout_seconds
    [[sources]] name = "source.table", file = "data/x.csv", columns = { col = "DUCKDB TYPE", ... }
    [splits]   seed, train_fraction, test_fraction, entity = "source.table.col", follow = ["a.b.c -> d.e.f"]
    [[targets]] model, key, expected = "expected/x.csv", columns = [...], key_of = "source.table.col",
               tolerance = { col = { abs_tol = 0.005, rel_tol = 0 } }
    [data_tests] mode = "score" | "off"
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.compare import Tolerance, _agree, _value
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.validate import DbtSpec
from coco_sql.languages.dbt.yaml_check import check_yaml
from coco_sql.options import SPLIT_SEED, TIMEOUT_SECONDS
from coco_sql.tasks.pack_files import Reader, check_duckdb_type, display
from coco_sql.tasks.splits import SPLIT_NAMES, Split, partition_ids

_TOP = ("name", "description", "language", "dialect", "program", "sources", "splits", "targets", "data_tests",
        "source")  # fmt: skip
TEST_KINDS = ("unique", "not_null", "accepted_values", "relationships")


@dataclass(frozen=True)
class Target:
    model: str
    key: str
    columns: tuple[str, ...]
    tolerances: Mapping[str, Tolerance]


@dataclass(frozen=True)
class DbtTask:
    """What a dbt pack adds to `TaskPack` (its `kind_data`): the spec the validator checks programs against,
    the targets, the test instances and each split's own copy of the sources."""

    spec: DbtSpec
    targets: tuple[Target, ...]
    sources: Mapping[str, Mapping[str, pd.DataFrame]]  # split -> "source.table" -> rows
    tests: tuple[str, ...]  # the test instance ids (`test:KIND:MODEL.COLUMN`)


def row_json(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """A row's compared columns as canonical JSON (values as `compare` reads them)."""
    return json.dumps({c: _value(row.get(c)) for c in columns}, sort_keys=True)


class RowScorer:
    """1 when every compared column of the output row agrees with the expected row within its tolerance (a test
    instance: when its output equals the expected status); outputs are JSON texts (contract VARCHAR)."""

    kind = "dbt_rows"

    def __init__(self, tolerances: Mapping[str, Tolerance]) -> None:
        self.tolerances = dict(tolerances)

    def score(self, outputs: Sequence[object | None], expected: Sequence[object]) -> list[float]:
        return [self._one(o, e) for o, e in zip(outputs, expected, strict=True)]

    def _one(self, output: object | None, expected: object) -> float:
        if output is None:
            return 0.0
        try:
            got, want = json.loads(str(output)), json.loads(str(expected))
        except ValueError:
            return 0.0
        if not isinstance(want, dict):
            return float(got == want)
        if not isinstance(got, dict):
            return 0.0
        agree = all(
            c in got and _agree(got[c], v, self.tolerances.get(c, Tolerance())) for c, v in want.items()
        )
        return float(agree)


def _column_ref(
    reader: Reader, key: str, value: object, tables: Mapping[str, pd.DataFrame]
) -> tuple[str, str]:
    if not isinstance(value, str) or value.count(".") != 2:
        raise reader.error(key, f"must name a source column as 'source.table.column' (got {value!r})")
    table, column = value.rsplit(".", 1)
    if table not in tables or column not in tables[table].columns:
        raise reader.error(key, f"{value!r} is not a column of the task's sources")
    return table, column


def check_source_name(reader: Reader, key: str, name: object) -> tuple[str, str]:
    """(source, table) of a source table's name 'source.table', as dbt's ``source('source', 'table')`` reads it."""
    if (
        not isinstance(name, str)
        or name.count(".") != 1
        or not all(p.isidentifier() for p in name.split("."))
    ):
        raise reader.error(key, f"must be 'source.table' (got {name!r})")
    source, table = name.split(".")
    return source, table


def _sources(reader: Reader, root: Path, doc: Mapping[str, Any], con: duckdb.DuckDBPyConnection) -> tuple[
    dict[str, pd.DataFrame], dict[tuple[str, str], dict[str, str]]
]:  # fmt: skip
    entries = doc.get("sources")
    if not isinstance(entries, list) or not entries:
        raise reader.error("sources", "a dbt pack needs at least one [[sources]] table")
    tables: dict[str, pd.DataFrame] = {}
    columns: dict[tuple[str, str], dict[str, str]] = {}
    for i, entry in enumerate(entries):
        key = f"sources[{i}]"
        if not isinstance(entry, dict):
            raise reader.error(key, "must be a table")
        reader.check_keys(entry, key, ("name", "file", "columns"))
        name = reader.get(entry, f"{key}.name", str)
        check_source_name(reader, f"{key}.name", name)
        path = reader.file_path(root, entry, f"{key}.file")
        types = reader.get(entry, f"{key}.columns", dict)
        checked = {c: check_duckdb_type(reader, f"{key}.columns.{c}", str(t), con) for c, t in types.items()}
        spec = ", ".join(f"'{c}': '{t}'" for c, t in checked.items())
        try:
            frame = con.execute(
                f"SELECT * FROM read_csv(?, header = true, columns = {{{spec}}})", [str(path)]
            ).df()
        except duckdb.Error as error:
            raise reader.error(
                f"{key}.file", f"{display(path)}: {' '.join(str(error).split())[:200]}"
            ) from None  # type: ignore[arg-type]
        tables[name] = frame
        source, table = name.split(".")
        columns[(source, table)] = checked
    return tables, columns


def _split_sources(
    reader: Reader, splits: Mapping[str, Any], tables: Mapping[str, pd.DataFrame], seed: int
) -> dict[str, dict[str, pd.DataFrame]]:
    """Each split's copy of the sources: its entity rows and the rows that follow them."""
    entity_table, entity_column = _column_ref(reader, "splits.entity", splits.get("entity"), tables)
    train = reader.get(splits, "splits.train_fraction", float)
    test = reader.get(splits, "splits.test_fraction", float)
    if not (0 < train < 1 and 0 < test < 1 and train + test < 1):
        raise reader.error(
            "splits.train_fraction", "train and test fractions must be in (0, 1) and leave val rows"
        )
    follow = []
    for i, rule in enumerate(reader.get(splits, "splits.follow", list, [])):
        if not isinstance(rule, str) or "->" not in rule:
            raise reader.error(
                f"splits.follow[{i}]", f"must be 'source.table.col -> source.table.col' (got {rule!r})"
            )
        child, parent = (part.strip() for part in rule.split("->"))
        follow.append(
            (
                _column_ref(reader, "splits.follow", child, tables),
                _column_ref(reader, "splits.follow", parent, tables),
            )
        )
    ids = [str(v) for v in tables[entity_table][entity_column].dropna().unique()]
    assigned = partition_ids(ids, seed, train, test)
    result: dict[str, dict[str, pd.DataFrame]] = {}
    for name in SPLIT_NAMES:
        keep = set(assigned[name])
        own = {entity_table: tables[entity_table][tables[entity_table][entity_column].astype(str).isin(keep)]}
        for (child_table, child_column), (parent_table, parent_column) in follow:
            if parent_table not in own:
                raise reader.error(
                    "splits.follow", f"{parent_table} must be the entity or follow it, listed earlier"
                )
            values = set(own[parent_table][parent_column].astype(str))
            own[child_table] = tables[child_table][tables[child_table][child_column].astype(str).isin(values)]
        for table, frame in tables.items():
            own.setdefault(table, frame)  # a table that does not follow the entity (a dimension): whole
        result[name] = {t: f.reset_index(drop=True) for t, f in own.items()}
    return result


def expected_files(reader: Reader, root: Path, doc: Mapping[str, Any]) -> list[tuple[pd.DataFrame, str]]:
    """Each target's expected rows as read from its CSV file (every cell text), and how messages name it."""
    found = []
    for i, entry in enumerate(doc.get("targets") or []):
        if not isinstance(entry, dict):
            raise reader.error(f"targets[{i}]", "must be a table")
        path = reader.file_path(root, entry, f"targets[{i}].expected")
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])  # type: ignore[arg-type]
        found.append((frame, display(path)))  # type: ignore[arg-type]
    return found


def _targets(reader: Reader, doc: Mapping[str, Any], frames: Sequence[tuple[pd.DataFrame, str]],
             splits: Mapping[str, Mapping[str, pd.DataFrame]], entity: str,
             key_text: Callable[[Any], str]) -> tuple[list[Target], dict[str, dict[str, str]]]:  # fmt: skip
    """The targets and, per split, each row instance's expected JSON (`frames`: each target's expected rows and
    its name in messages; `key_text`: a key value as instance ids and split membership read it)."""
    entries = doc.get("targets")
    if not isinstance(entries, list) or not entries:
        raise reader.error("targets", "a dbt pack needs at least one [[targets]] model")
    targets: list[Target] = []
    expected: dict[str, dict[str, str]] = {name: {} for name in SPLIT_NAMES}
    for i, (entry, (frame, label)) in enumerate(zip(entries, frames, strict=True)):
        key = f"targets[{i}]"
        if not isinstance(entry, dict):
            raise reader.error(key, "must be a table")
        reader.check_keys(entry, key, ("model", "key", "expected", "columns", "tolerance", "key_of"))
        model, key_column = reader.get(entry, f"{key}.model", str), reader.get(entry, f"{key}.key", str)
        columns = tuple(reader.get(entry, f"{key}.columns", list))
        lacking = [c for c in (key_column, *columns) if c not in frame.columns]
        if lacking:
            raise reader.error(
                f"{key}.expected",
                f"{label} has no column {lacking[0]!r} (columns: {', '.join(map(str, frame.columns))})",
            )
        if frame[key_column].isna().any() or frame[key_column].duplicated().any():
            raise reader.error(f"{key}.key", f"{label}: key {key_column!r} must be unique and never empty")
        tolerances = {}
        for column, tol in reader.get(entry, f"{key}.tolerance", dict, {}).items():
            if column not in columns or not isinstance(tol, dict) or set(tol) - {"abs_tol", "rel_tol"}:
                raise reader.error(
                    f"{key}.tolerance.{column}", "must be { abs_tol = x, rel_tol = y } of a compared column"
                )
            tolerances[column] = Tolerance(float(tol.get("abs_tol", 1e-9)), float(tol.get("rel_tol", 0.0)))
        table, column = _column_ref(reader, f"{key}.key_of", entry.get("key_of", entity), splits["train"])
        keys = [key_text(v) for v in frame[key_column]]
        for split, sources in splits.items():
            owned = {key_text(v) for v in sources[table][column]}
            for name, record in zip(keys, frame.to_dict(orient="records"), strict=True):
                if name in owned:
                    expected[split][f"{model}:{name}"] = row_json(record, columns)
        targets.append(Target(model, key_column, columns, tolerances))
    return targets, expected


def seed_tests(project: DbtProject) -> tuple[str, ...]:
    """The data tests the seed project declares on its models' columns, as instance ids."""
    import yaml

    found: set[str] = set()
    for path in project.paths("models/", ".yml"):
        document = yaml.safe_load(project.files[path]) or {}
        for model in document.get("models") or []:
            for column in model.get("columns") or []:
                for test in (column.get("data_tests") or []) + (column.get("tests") or []):
                    kind = test if isinstance(test, str) else next(iter(test), "")
                    if kind in TEST_KINDS:
                        found.add(f"test:{kind}:{model['name']}.{column['name']}")
    return tuple(sorted(found))


def load_dbt_pack(root: Path, reader: Reader, doc: Mapping[str, Any], fingerprint: Any) -> Any:
    """The `TaskPack` of a dbt pack (see the module docstring); TaskError (one line) for anything wrong."""
    reader.check_keys(doc, "", _TOP)
    name = reader.get(doc, "name", str)
    if name != root.name:
        raise reader.error("name", f"must equal the pack directory name {root.name!r} (got {name!r})")
    program = reader.table(doc, "program", ("seed", "allowed_functions", "timeout_seconds"))
    seed_dir = root / reader.get(program, "program.seed", str)
    if not seed_dir.is_dir() or not seed_dir.resolve().is_relative_to(root.resolve()):
        raise reader.error("program.seed", f"must be a folder inside the pack (got {display(seed_dir)})")
    try:
        seed = DbtProject.from_dir(seed_dir)
    except CandidateRejected as error:
        raise reader.error("program.seed", str(error)) from None
    with duckdb.connect(":memory:") as con:
        tables, source_columns = _sources(reader, root, doc, con)
    expected = expected_files(reader, root, doc)
    files = [reader.path, *sorted(p for p in root.rglob("*") if p.is_file() and "reference" not in p.parts
                                  and "solution" not in p.parts)]  # fmt: skip
    return assemble_dbt_task(reader, doc, DbtTables(seed, tables, source_columns, expected),
                             root=root, fingerprint=fingerprint(root, files))  # fmt: skip


@dataclass(frozen=True)
class DbtTables:
    """What a dbt task is read from, however it was read (a pack's files, a registered task's stored rows): the
    seed project, each source table's rows and column types, and each target's expected rows with their name
    in messages."""

    seed: DbtProject
    tables: Mapping[str, pd.DataFrame]  # "source.table" -> rows
    source_columns: Mapping[tuple[str, str], Mapping[str, str]]
    expected: Sequence[tuple[pd.DataFrame, str]]


def assemble_dbt_task(reader: Reader, doc: Mapping[str, Any], read: DbtTables, *, root: Path, fingerprint: str,
                      key_text: Callable[[Any], str] = str) -> Any:  # fmt: skip
    """The `TaskPack` of a dbt task from its task.toml document `doc` (read through `reader`, whose errors name
    what the user wrote) and its tables: every check of the loader but reading files."""
    from coco_sql.tasks.loader import Contract, TaskPack

    name = reader.get(doc, "name", str)
    dialect = reader.choice(doc, "dialect", ("duckdb", "snowflake"), "duckdb")
    program = reader.table(doc, "program", ("seed", "allowed_functions", "timeout_seconds"))
    functions = frozenset(str(f).upper() for f in reader.get(program, "program.allowed_functions", list, []))
    timeout = float(reader.bounded(program, "program.timeout_seconds", TIMEOUT_SECONDS))
    splits_table = reader.table(
        doc, "splits", ("seed", "mode", "train_fraction", "test_fraction", "entity", "follow")
    )
    split_seed = reader.bounded(splits_table, "splits.seed", SPLIT_SEED)
    per_split = _split_sources(reader, splits_table, read.tables, split_seed)
    targets, expected = _targets(
        reader, doc, read.expected, per_split, str(splits_table.get("entity")), key_text
    )
    tests_mode = reader.choice(reader.table(doc, "data_tests", ("mode",), required=False), "data_tests.mode",
                               ("score", "off", "report"), "score")  # fmt: skip
    try:
        check_yaml(read.seed)  # the seed's YAML, before its tests are read from it
    except CandidateRejected as error:
        raise reader.error("program.seed", str(error)) from None
    tests = seed_tests(read.seed) if tests_mode == "score" else ()
    splits = {}
    for split in SPLIT_NAMES:
        rows = dict(sorted(expected[split].items())) | dict.fromkeys(tests, json.dumps("pass"))
        if not rows:
            raise reader.error("splits.train_fraction", f"leaves the {split} split without expected rows")
        splits[split] = Split(split, pd.DataFrame({"id": list(rows)}), rows)
    spec = DbtSpec(dialect=dialect, allowed_functions=functions, source_columns=dict(read.source_columns),
                   targets={t.model: (t.key, *t.columns) for t in targets})  # fmt: skip
    tolerances = {c: tol for t in targets for c, tol in t.tolerances.items()}
    source = {k: str(v) for k, v in reader.table(doc, "source", ("name", "url", "license", "revision", "notes"),
                                                  required=False).items()}  # fmt: skip
    return TaskPack(
        name=name, description=reader.get(doc, "description", str).strip(), root=root, dialect=dialect,
        input_columns={}, contract=Contract("row", "VARCHAR"), scorer=RowScorer(tolerances),
        seed_program=read.seed.to_text(), allowed_functions=functions, timeout_seconds=timeout,
        split_seed=split_seed, split_mode="partition", source=source, _splits=splits,
        _fingerprint=fingerprint, language="dbt",
        kind_data=DbtTask(spec, tuple(targets), per_split, tests),
    )  # fmt: skip
