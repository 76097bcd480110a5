"""A dbt task: its sources, targets and splits, checked and assembled from a task.toml document and its tables
(`pack.load_dbt_pack` reads a pack's files; `registered` a task's stored rows).

The instances of a dbt task are its expected rows, one per target key (id ``model:key``, the key's columns
joined by ``|`` when it has several), one per target that counts the rows it returned that no expected row has
(id ``model#extra``), and the data tests the seed project declares on the models a target reads (id
``test:KIND:MODEL.COLUMN``). A row instance's expected value is the JSON of its compared columns; the program's
output for it is the JSON of the row it produced (`language.DbtRunner`), and `RowScorer` scores the share of
its columns that agree within the task's tolerance. A test instance expects ``pass``. A program's score is
per target, then weighted over targets and the data tests (`aggregate`, `compare`'s docstring).

Splits partition the `[splits] entity` column's values; each split's copy of the sources holds the entity rows
of its own partition and, following `follow` (``child.col -> parent.col``), only the rows that reference them.
A target row belongs to a split when its `split_by` column's value (default: its key's first column) is in
that split's `key_of` column (default: the entity); when `key_of` names a table that follows no entity (a
dimension, whole in every split), the target's keys themselves are partitioned. So each split's dbt run sees
its own sources only, and the mutator's evaluations see only train rows.

task.toml keys (besides name, description, language, dialect, [source])::

    [program]  seed = "seed" (a folder), allowed_functions, timeout_seconds
    [[sources]] name = "source.table", file = "data/x.csv", columns = { col = "DUCKDB TYPE", ... }
    [splits]   seed, train_fraction, test_fraction, entity = "source.table.col", follow = ["a.b.c -> d.e.f"]
    [[targets]] model, key = "col" or ["col", ...], expected = "expected/x.csv" (or .parquet), columns = [...],
               key_of = "source.table.col", split_by = "col", split = "entity" | "keys", weight = 1.0,
               tolerance = { col = { abs_tol = 0.005, rel_tol = 0 } }
    [data_tests] mode = "score" | "report" | "off", weight = 0.1 (their share of the program's score)
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pandas as pd

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.compare import Tolerance, _value, row_share, value_text
from coco_sql.languages.dbt.project import DbtProject, upstream_models
from coco_sql.languages.dbt.validate import DbtSpec
from coco_sql.languages.dbt.yaml_check import check_yaml
from coco_sql.options import SPLIT_SEED, TIMEOUT_SECONDS
from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT
from coco_sql.tasks.pack_files import Reader
from coco_sql.tasks.splits import SPLIT_NAMES, Split, partition_ids

TEST_KINDS = ("unique", "not_null", "accepted_values", "relationships")
EXTRA = "#extra"  # a target's extra-rows instance is ``model#extra``
EXTRA_ROWS, EXPECTED_ROWS = "__extra_rows__", "__expected_rows__"  # its output's and expected value's keys
TESTS_WEIGHT = 0.1  # the data tests' share of a program's score, unless [data_tests] weight says otherwise


@dataclass(frozen=True)
class Target:
    model: str
    keys: tuple[str, ...]
    columns: tuple[str, ...]
    tolerances: Mapping[str, Tolerance]
    weight: float = 1.0

    @property
    def key(self) -> str:
        """The key as messages name it (its columns, comma-separated)."""
        return ", ".join(self.keys)


@dataclass(frozen=True)
class DbtTask:
    """What a dbt pack adds to `TaskPack` (its `kind_data`): the spec the validator checks programs against,
    the targets, the test instances and each split's own copy of the sources."""

    spec: DbtSpec
    targets: tuple[Target, ...]
    sources: Mapping[str, Mapping[str, pd.DataFrame]]  # split -> "source.table" -> rows
    tests: tuple[str, ...]  # the test instance ids (`test:KIND:MODEL.COLUMN`)
    expected_keys: Mapping[str, frozenset[str]] = field(default_factory=lambda: MappingProxyType({}))
    tests_weight: float = TESTS_WEIGHT
    cut: frozenset[str] = frozenset()  # the source tables each split holds a part of (the rest are whole)
    cuts: tuple[str, ...] = ()  # how each split's sources were cut, one line each (for `init` and the docs)
    seed_dir: Path | None = (
        None  # the folder the seed project was read from (`patch`: the diff is against it)
    )


def row_json(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    """A row's compared columns as canonical JSON (values as `compare` reads them)."""
    return json.dumps({c: _value(row.get(c)) for c in columns}, sort_keys=True)


def aggregate(data: DbtTask, ids: Sequence[str], scores: Sequence[float]) -> float:
    """A program's score over the instances `ids` (a split or a sample of one): per target, its rows' scores
    over the union of keys (the mean row score times its extra-rows instance's score, n / (n + extra)), then
    the targets' weighted mean, with the data tests' pass share as `tests_weight` of the whole."""
    weights = {t.model: t.weight for t in data.targets}
    rows: dict[str, list[float]] = {}
    extra: dict[str, float] = {}
    tests: list[float] = []
    for instance, score in zip(ids, scores, strict=True):
        name = str(instance)
        if name.endswith(EXTRA) and name[: -len(EXTRA)] in weights:
            extra[name[: -len(EXTRA)]] = float(score)
            continue
        model = name.split(":", 1)[0]
        if model in weights and ":" in name:
            rows.setdefault(model, []).append(float(score))
        else:
            tests.append(float(score))
    parts = []
    for model, weight in weights.items():
        found = rows.get(model)
        if found:
            parts.append((weight, sum(found) / len(found) * extra.get(model, 1.0)))
        elif model in extra:
            parts.append((weight, extra[model]))
    total = sum(w for w, _ in parts)
    targets = sum(w * s for w, s in parts) / total if total > 0 else None
    tested = sum(tests) / len(tests) if tests else None
    if targets is None:
        return tested if tested is not None else 0.0
    if tested is None or data.tests_weight <= 0:
        return targets
    return (1 - data.tests_weight) * targets + data.tests_weight * tested


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
        if EXPECTED_ROWS in want:  # a target's extra-rows instance: n / (n + extra)
            expected, extra = int(want[EXPECTED_ROWS]), got.get(EXTRA_ROWS)
            if not isinstance(extra, int) or extra < 0:
                return 0.0
            return 1.0 if expected + extra == 0 else expected / (expected + extra)
        return row_share(got, want, self.tolerances)


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


@dataclass(frozen=True)
class SplitSources:
    """Each split's copy of the sources, which tables were cut (the entity's and those that follow it), and how,
    one line per cut table."""

    sources: dict[str, dict[str, pd.DataFrame]]
    cut: frozenset[str]
    cuts: tuple[str, ...]


def _split_sources(
    reader: Reader, splits: Mapping[str, Any], tables: Mapping[str, pd.DataFrame], seed: int
) -> SplitSources:
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
    ids = [str(v) for v in tables[entity_table][entity_column].dropna().astype(str).unique()]
    assigned = partition_ids(ids, seed, train, test)
    result: dict[str, dict[str, pd.DataFrame]] = {}
    cut = {entity_table} | {child for (child, _), _ in follow}
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
    sizes = {t: "/".join(str(len(result[n][t])) for n in SPLIT_NAMES) for t in tables}
    cuts = [
        f"{entity_table}: by {entity_column} ({len(ids)} values; rows train/val/test {sizes[entity_table]})"
    ]
    cuts += [
        f"{child}: rows whose {child_column} is a kept {parent}.{parent_column} ({sizes[child]})"
        for (child, child_column), (parent, parent_column) in follow
    ]
    cuts += [f"{t}: whole in every split ({len(f)} rows)" for t, f in tables.items() if t not in cut]
    return SplitSources(result, frozenset(cut), tuple(cuts))


def _targets(reader: Reader, doc: Mapping[str, Any], frames: Sequence[tuple[pd.DataFrame, str]],
             splits: SplitSources, entity: str, key_text: Callable[[Any], str],
             seed: int, fractions: tuple[float, float]) -> tuple[list[Target], dict[str, dict[str, str]], dict[str, frozenset[str]]]:  # fmt: skip
    """The targets, per split each row instance's expected JSON, and each target's expected keys (`frames`: each
    target's expected rows and its name in messages; `key_text`: a key value as instance ids and split
    membership read it)."""
    entries = doc.get("targets")
    if not isinstance(entries, list) or not entries:
        raise reader.error("targets", "a dbt pack needs at least one [[targets]] model")
    targets: list[Target] = []
    expected: dict[str, dict[str, str]] = {name: {} for name in SPLIT_NAMES}
    keys_of: dict[str, frozenset[str]] = {}
    for i, (entry, (frame, label)) in enumerate(zip(entries, frames, strict=True)):
        key = f"targets[{i}]"
        if not isinstance(entry, dict):
            raise reader.error(key, "must be a table")
        reader.check_keys(entry, key, ("model", "key", "expected", "columns", "tolerance", "key_of", "split_by",
                                       "weight", "split"))  # fmt: skip
        model = reader.get(entry, f"{key}.model", str)
        given = entry.get("key")
        key_columns = (given,) if isinstance(given, str) else tuple(given) if isinstance(given, list) else ()
        if not key_columns or not all(isinstance(c, str) and c for c in key_columns):
            raise reader.error(f"{key}.key", f"must be a column name or a list of them (got {given!r})")
        columns = tuple(reader.get(entry, f"{key}.columns", list))
        split_by = reader.get(entry, f"{key}.split_by", str, key_columns[0])
        lacking = [c for c in (*key_columns, *columns, split_by) if c not in frame.columns]
        if lacking:
            raise reader.error(
                f"{key}.expected",
                f"{label} has no column {lacking[0]!r} (columns: {', '.join(map(str, frame.columns))})",
            )
        texts = [_joined(record, key_columns, key_text) for record in frame.to_dict(orient="records")]
        if frame[list(key_columns)].isna().any().any() or len(set(texts)) != len(texts):
            raise reader.error(
                f"{key}.key", f"{label}: key {', '.join(key_columns)!r} must be unique and never empty"
            )
        weight = float(reader.get(entry, f"{key}.weight", (int, float), 1.0))
        if not 0 < weight <= 1000:
            raise reader.error(f"{key}.weight", f"must be a number in (0, 1000] (got {weight!r})")
        tolerances = {}
        for column, tol in reader.get(entry, f"{key}.tolerance", dict, {}).items():
            if column not in columns or not isinstance(tol, dict) or set(tol) - {"abs_tol", "rel_tol"}:
                raise reader.error(
                    f"{key}.tolerance.{column}", "must be { abs_tol = x, rel_tol = y } of a compared column"
                )
            tolerances[column] = Tolerance(float(tol.get("abs_tol", 1e-9)), float(tol.get("rel_tol", 0.0)))
        how = reader.get(entry, f"{key}.split", str, "entity")
        if how not in ("entity", "keys"):
            raise reader.error(f"{key}.split", f'must be "entity" or "keys" (got {how!r})')
        table, column = _column_ref(
            reader, f"{key}.key_of", entry.get("key_of", entity), splits.sources["train"]
        )
        records = frame.to_dict(orient="records")
        if how == "entity" and table in splits.cut:
            owner = {
                split: {key_text(v) for v in sources[table][column]}
                for split, sources in splits.sources.items()
            }
            member = [
                next((s for s in SPLIT_NAMES if key_text(r[split_by]) in owner[s]), None) for r in records
            ]
        else:  # the keys' table is whole in every split: the target's own keys are partitioned
            parts = partition_ids(texts, seed, *fractions)
            where = {k: s for s, ks in parts.items() for k in ks}
            member = [where[t] for t in texts]
        for name, record, split in zip(texts, records, member, strict=True):
            if split is not None:
                expected[split][f"{model}:{name}"] = row_json(
                    record, (*key_columns, *columns)
                )  # the key counts
        if not any(m == "train" for m in member):
            raise reader.error(f"{key}.split_by", f"{label}: no row's {split_by} is a value of {entry.get('key_of', entity)} "
                               "in the train split")  # fmt: skip
        for split in SPLIT_NAMES:
            count = sum(1 for m in member if m == split)
            expected[split][f"{model}{EXTRA}"] = json.dumps({EXPECTED_ROWS: count}, sort_keys=True)
        keys_of[model] = frozenset(texts)
        targets.append(Target(model, key_columns, columns, tolerances, weight))
    return targets, expected, keys_of


def _joined(record: Mapping[str, Any], keys: Sequence[str], key_text: Callable[[Any], str]) -> str:
    """A row's key as its instance id holds it: each key column's text, joined by ``|``."""
    return "|".join(key_text(record[k]) for k in keys)


def seed_tests(project: DbtProject, targets: Sequence[str] | None = None) -> tuple[str, ...]:
    """The data tests the seed project declares on its models' columns that a run runs (`yaml_check` keeps dbt's
    generic tests without a where), as instance ids: on the models the `targets` read (themselves included; all
    models when None)."""
    scope = None if targets is None else upstream_models(project, targets)
    found: set[str] = set()
    for model, entry in check_yaml(project).run_models.items():
        if scope is not None and model not in scope:
            continue
        for column in entry.get("columns") or []:
            for test in column.get("data_tests") or []:
                kind = test if isinstance(test, str) else next(iter(test), "")
                if kind in TEST_KINDS:
                    found.add(f"test:{kind}:{model}.{column['name']}")
    return tuple(sorted(found))


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
                      key_text: Callable[[Any], str] = value_text, seed_dir: Path | None = None) -> Any:  # fmt: skip
    """The `TaskPack` of a dbt task from its task.toml document `doc` (read through `reader`, whose errors name
    what the user wrote) and its tables: every check of the loader but reading files."""
    from coco_sql.tasks.loader import Contract, TaskPack

    name = reader.get(doc, "name", str)
    dialect = reader.choice(doc, "dialect", (SANDBOX_DIALECT, DEPLOY_DIALECT), SANDBOX_DIALECT)
    program = reader.table(doc, "program", ("seed", "allowed_functions", "timeout_seconds"))
    functions = frozenset(str(f).upper() for f in reader.get(program, "program.allowed_functions", list, []))
    timeout = float(reader.bounded(program, "program.timeout_seconds", TIMEOUT_SECONDS))
    splits_table = reader.table(
        doc, "splits", ("seed", "mode", "train_fraction", "test_fraction", "entity", "follow")
    )
    split_seed = reader.bounded(splits_table, "splits.seed", SPLIT_SEED)
    per_split = _split_sources(reader, splits_table, read.tables, split_seed)
    fractions = (float(splits_table["train_fraction"]), float(splits_table["test_fraction"]))
    targets, expected, keys_of = _targets(
        reader,
        doc,
        read.expected,
        per_split,
        str(splits_table.get("entity")),
        key_text,
        split_seed,
        fractions,
    )
    tests_table = reader.table(doc, "data_tests", ("mode", "weight"), required=False)
    tests_mode = reader.choice(tests_table, "data_tests.mode", ("score", "off", "report"), "score")
    tests_weight = float(reader.get(tests_table, "data_tests.weight", (int, float), TESTS_WEIGHT))
    if not 0 <= tests_weight < 1:
        raise reader.error("data_tests.weight", f"must be in [0, 1) (got {tests_weight!r})")
    try:
        check_yaml(read.seed)  # the seed's YAML, before its tests are read from it
    except CandidateRejected as error:
        raise reader.error("program.seed", str(error)) from None
    tests = seed_tests(read.seed, [t.model for t in targets]) if tests_mode == "score" else ()
    splits = {}
    for split in SPLIT_NAMES:
        rows = dict(sorted(expected[split].items())) | dict.fromkeys(tests, json.dumps("pass"))
        if not rows:
            raise reader.error("splits.train_fraction", f"leaves the {split} split without expected rows")
        splits[split] = Split(split, pd.DataFrame({"id": list(rows)}), rows)
    spec = DbtSpec(dialect=dialect, allowed_functions=functions, source_columns=dict(read.source_columns),
                   targets={t.model: (*t.keys, *t.columns) for t in targets})  # fmt: skip
    tolerances = {c: tol for t in targets for c, tol in t.tolerances.items()}
    source = {k: str(v) for k, v in reader.table(doc, "source", ("name", "url", "license", "revision", "notes"),
                                                  required=False).items()}  # fmt: skip
    return TaskPack(
        name=name, description=reader.get(doc, "description", str).strip(), root=root, dialect=dialect,
        input_columns={}, contract=Contract("row", "VARCHAR"), scorer=RowScorer(tolerances),
        seed_program=read.seed.to_text(), allowed_functions=functions, timeout_seconds=timeout,
        split_seed=split_seed, split_mode="partition", source=source, _splits=splits,
        _fingerprint=fingerprint, language="dbt",
        kind_data=DbtTask(spec, tuple(targets), per_split.sources, tests, MappingProxyType(keys_of),
                          tests_weight, per_split.cut, per_split.cuts, seed_dir),
    )  # fmt: skip
