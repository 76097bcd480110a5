"""A project's data tests run as warehouse queries: dbt's four generic tests, as dbt-core 1.11 writes them.

The tests a program may declare (`yaml_check`: unique, not_null, accepted_values with values and quote,
relationships with to and field, config severity) on its models' columns, each as the SQL of dbt's macro
(``default__test_<name>`` in dbt's global project) with the model's materialised table for ``{{ model }}``;
dbt counts its rows (``count(*) as failures``), and so does this. A test with failures is ``fail``, or ``warn``
under ``severity: warn``; a test whose model, or the model it relates to, was not built is ``error``, as dbt
reports a test over a missing relation. Which tests run: those of the selected models (dbt's
``test --select +target``) whose instance the task scores (`task.seed_tests`); the others would not change a
score. All of them go in one query (one row per test); if it fails, each runs alone, and one that fails alone
is ``error``.

Where dbt pastes a value into SQL unescaped (an accepted value with a quote; with ``quote: false``, anything
but a number or a boolean), the test is ``error`` here: in dbt such SQL fails or does something else than the
test, and a warehouse query must not take text from a program.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from coco_sql.errors import EvaluationError, EvaluationTimeout
from coco_sql.languages.dbt.compiled import Deadline, ProjectRun, Relation
from coco_sql.languages.dbt.runner import TestOutcome
from coco_sql.languages.dbt.task import TEST_KINDS
from coco_sql.languages.dbt.validate import ValidatedProject
from coco_sql.sqlkit.rejection import one_line
from coco_sql.store.base import CandidateEngine

_RELATION = re.compile(
    r"""\s*(?:ref\(\s*(['"])(?P<model>\w+)\1\s*\)|source\(\s*(['"])(?P<source>\w+)\3\s*,\s*(['"])(?P<table>\w+)\5\s*\))\s*"""
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class DataTest:
    """One generic test declared on a model's column: its kind, arguments and severity."""

    kind: str
    model: str
    column: str
    arguments: Mapping[str, Any]
    severity: str  # error | warn

    @property
    def instance(self) -> str:
        return f"test:{self.kind}:{self.model}.{self.column}"

    @property
    def name(self) -> str:
        """A name that starts as dbt's does (``<kind>_``), which is how the runner's outputs read a test."""
        return f"{self.kind}_{self.model}_{self.column}"


def declared_tests(project: ValidatedProject) -> Iterator[DataTest]:
    """Every generic test on a model column of the project's property files (already checked by `yaml_check`)."""
    files = project.project.files
    for path in project.project.paths("models/", ".yml"):
        document = yaml.safe_load(files[path]) or {}
        for model in document.get("models") or []:
            for column in model.get("columns") or []:
                for test in (column.get("data_tests") or []) + (column.get("tests") or []):
                    kind, body = (test, {}) if isinstance(test, str) else next(iter(test.items()))
                    if kind not in TEST_KINDS:
                        continue
                    body = body or {}
                    arguments = {**(body.get("arguments") or {}), **{k: v for k, v in body.items()
                                                                     if k not in ("arguments", "config")}}  # fmt: skip
                    severity = str((body.get("config") or {}).get("severity", "error")).lower()
                    yield DataTest(kind, model["name"], column["name"], arguments, severity)


def test_sql(test: DataTest, relations: Mapping[str, Relation], sources: Mapping[tuple[str, str], str],
             dialect: str) -> str | None:  # fmt: skip
    """dbt's SQL for `test` (module docstring), or None when dbt's would fail (a missing relation, a value
    pasted unescaped)."""
    model = relations.get(test.model)
    if model is None or not _IDENTIFIER.fullmatch(test.column):
        return None
    table, column = model.sql(dialect), test.column
    if test.kind == "not_null":
        return f"select {column} from {table} where {column} is null"
    if test.kind == "unique":
        return (
            f"select {column} as unique_field, count(*) as n_records from {table} where {column} is not null "
            f"group by {column} having count(*) > 1"
        )
    if test.kind == "accepted_values":
        values = [_value(v, test.arguments.get("quote", True)) for v in test.arguments.get("values") or []]
        if not values or any(v is None for v in values):
            return None
        return (
            f"with all_values as (select {column} as value_field, count(*) as n_records from {table} "
            f"group by {column}) select * from all_values where value_field not in ({', '.join(values)})"  # type: ignore[arg-type]
        )
    found = _RELATION.fullmatch(str(test.arguments.get("to", "")))
    field = str(test.arguments.get("field", ""))
    if found is None or not _IDENTIFIER.fullmatch(field):
        return None
    if found.group("model"):
        parent = relations.get(found.group("model"))
        if parent is None:
            return None
        to = parent.sql(dialect)
    else:
        staged = sources.get((found.group("source"), found.group("table")))
        if staged is None:
            return None
        to = staged
    return (
        f"with child as (select {column} as from_field from {table} where {column} is not null), "
        f"parent as (select {field} as to_field from {to}) select from_field from child "
        "left join parent on child.from_field = parent.to_field where parent.to_field is null"
    )


def _value(value: Any, quote: Any) -> str | None:
    """A value as dbt's macro pastes it (``'{{ value }}'``, or bare); None where that text is not the value."""
    text = str(value)  # Jinja prints a value with Python's str()
    if quote:
        return None if "'" in text or "\\" in text else f"'{text}'"
    if isinstance(value, bool) or (isinstance(value, int | float) and value == value):
        return text
    return None


def run_tests(
    engine: CandidateEngine,
    project: ValidatedProject,
    run: ProjectRun,
    sources: Mapping[tuple[str, str], str],
    wanted: frozenset[str],
    deadline: Deadline,
) -> tuple[TestOutcome, ...]:
    """The outcome of every test of a selected model whose instance is `wanted` (module docstring)."""
    chosen = [t for t in declared_tests(project) if t.instance in wanted and _selected(t, run)]
    queries = {k: test_sql(t, run.relations, sources, engine.dialect) for k, t in enumerate(chosen)}
    failures: dict[int, int | None] = {k: None for k, sql in queries.items() if sql is None}
    runnable = {k: sql for k, sql in queries.items() if sql is not None}
    if runnable:
        union = " union all ".join(
            f"select {k} as test, count(*) as failures from ({sql}) dbt_internal_test"
            for k, sql in runnable.items()
        )
        try:
            found = engine.query(union, deadline.left())
            failures.update({int(row[0]): int(row[1]) for row in found.rows})
        except EvaluationTimeout:
            raise
        except EvaluationError:
            for k, sql in runnable.items():
                failures[k] = _alone(engine, sql, deadline)
    return tuple(_outcome(t, failures.get(k)) for k, t in enumerate(chosen))


def _alone(engine: CandidateEngine, sql: str, deadline: Deadline) -> int | None:
    try:
        found = engine.query(f"select count(*) as failures from ({sql}) dbt_internal_test", deadline.left())
    except EvaluationTimeout:
        raise
    except EvaluationError:
        return None
    return int(found.rows[0][0])


def _selected(test: DataTest, run: ProjectRun) -> bool:
    """dbt's eager selection: a test runs when one of the models it reads is selected."""
    found = _RELATION.fullmatch(str(test.arguments.get("to", ""))) if test.kind == "relationships" else None
    return test.model in run.selected or (found is not None and found.group("model") in run.selected)


def _outcome(test: DataTest, failures: int | None) -> TestOutcome:
    if failures is None:
        status, message = "error", f"{test.name}: the test's SQL could not run"
    elif failures == 0:
        status, message = "pass", ""
    else:
        status = "warn" if test.severity == "warn" else "fail"
        message = f"Got {failures} result{'s' if failures != 1 else ''}, configured to {status} if != 0"
    return TestOutcome(test.name, test.model, test.column, status, failures, one_line(message))
