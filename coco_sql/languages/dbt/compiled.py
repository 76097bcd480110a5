"""A validated dbt project run as warehouse queries, model by model (`warehouse`): no dbt process.

Each model is its SQL as our renderer made it (`render`, via `validate.ValidatedModel.rendered`: the task's
dialect, every ``ref()`` / ``source()`` a placeholder relation), parsed with sqlglot in the task's dialect,
its placeholders replaced by the warehouse tables they stand for (a source: the split's staged rows; a ref: the
table the upstream model was materialised as), aliased by the name dbt's relation would have had (so
``orders.id`` still resolves), and written in the engine's dialect. Quoted plain identifiers are unquoted, as
for the SQL kind's probes (`engines.snowflake.queries.WarehouseQueries`): DuckDB reads ``"id"`` as ``id``,
Snowflake would not. The query's AI calls are Cortex's own and metered in the query itself
(the candidate engine's meter, `CandidateEngine.meter`): a model that calls one is materialised with its bill's columns, which are read once and
then kept out of every reader's sight (downstream models, tests and the targets read the model's own columns
only).

Models run in dependency order, the targets and everything upstream of them (dbt's ``--select +target``), each
materialised as a temporary table (`CandidateEngine.create_table`) whatever its `materialized`: the rows are
the same as dbt's view, table or ephemeral CTE, each model's AI calls run once per evaluation (a view would run
them again for every reader), and the data tests see the rows the targets were read from. A model that fails
is that model's one-line error and the models downstream of it are skipped, as dbt reports them; a disabled
model that is selected fails the run, as dbt fails to parse such a project. The whole run has one deadline.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.errors import CandidateRejected, EvaluationError, EvaluationTimeout
from coco_sql.languages.dbt.runner import DbtRunResult
from coco_sql.languages.dbt.validate import ValidatedModel, ValidatedProject
from coco_sql.llm.usage import Usage
from coco_sql.sqlkit.rejection import one_line
from coco_sql.store.base import CandidateEngine

_PLAIN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class Relation:
    """A warehouse table a model or source reads, and (when it also holds a bill's columns) the columns that are
    the model's own."""

    table: str
    columns: tuple[str, ...] | None = None

    def expression(self, alias: exp.TableAlias | None) -> exp.Expression:
        """What a placeholder becomes: the table, or a derived table of the model's own columns."""
        if self.columns is None:
            return exp.Table(this=exp.to_identifier(self.table), alias=alias)
        select = exp.select(*(exp.column(c) for c in self.columns)).from_(exp.to_table(self.table))
        return exp.Subquery(this=select, alias=alias)

    def sql(self, dialect: str) -> str:
        """The relation as a FROM item (a data test's)."""
        return self.expression(None).sql(dialect=dialect)


@dataclass
class Deadline:
    """One deadline for a whole run: each query gets what is left of it."""

    seconds: float
    started: float = field(default_factory=time.perf_counter)

    def left(self) -> float:
        remaining = self.seconds - (time.perf_counter() - self.started)
        if remaining <= 0:
            raise EvaluationTimeout(f"the dbt run exceeded its {self.seconds:g} s deadline")
        return remaining


@dataclass
class ProjectRun:
    """What running a project's models left: each built model's relation, one line per failed or skipped
    model, the models that were selected, and what their AI calls billed."""

    relations: dict[str, Relation] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    selected: frozenset[str] = frozenset()
    usage: Usage | None = None
    timings: dict[str, float] = field(default_factory=dict)


def model_query(
    model: ValidatedModel,
    relations: Mapping[str, Relation],
    sources: Mapping[tuple[str, str], str],
    task_dialect: str,
    dialect: str,
) -> str:
    """One model's SQL in the engine's `dialect` over `relations` (upstream models) and `sources` (staged
    tables): the module docstring's compilation."""
    return model_tree(model, relations, sources).sql(dialect=dialect)


def model_tree(
    model: ValidatedModel, relations: Mapping[str, Relation], sources: Mapping[tuple[str, str], str]
) -> exp.Expression:
    """The checked query of `model` (`ValidatedModel.tree`: the tree the validator checked, in the task's dialect,
    never parsed again) with its placeholder relations replaced by warehouse relations; nothing else changes
    but quoted plain identifiers, unquoted."""
    rendered = model.rendered
    if rendered is None or model.tree is None:
        raise EvaluationError(f"{model.path}: the model was validated without its checked query")
    tree: exp.Expression = model.tree.copy()
    for table in list(tree.find_all(exp.Table)):
        placeholder = table.name.lower()
        if table.db or table.catalog:
            continue
        if placeholder in rendered.refs:
            relation = relations[rendered.refs[placeholder]]
            label = rendered.refs[placeholder]
        elif placeholder in rendered.sources:
            relation = Relation(sources[rendered.sources[placeholder]])
            label = rendered.sources[placeholder][1]
        else:
            continue  # a CTE
        alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(label))
        replacement = relation.expression(alias)
        if table is tree:
            tree = replacement
        else:
            table.replace(replacement)
    for column in tree.find_all(exp.Column):  # `ref.col` reads the relation's alias, which is its label
        qualifier = column.args.get("table")
        name = qualifier.name.lower() if isinstance(qualifier, exp.Identifier) else ""
        label = rendered.refs.get(name) or (rendered.sources[name][1] if name in rendered.sources else None)
        if label is not None and not column.args.get("db"):
            column.set("table", exp.to_identifier(label))
    for identifier in tree.find_all(exp.Identifier):
        if identifier.quoted and _PLAIN.fullmatch(identifier.name):
            identifier.set("quoted", False)
    return tree


def run_models(
    engine: CandidateEngine,
    project: ValidatedProject,
    targets: Sequence[str],
    sources: Mapping[tuple[str, str], str],
    task_dialect: str,
    deadline: Deadline,
) -> ProjectRun:
    """Materialise the targets and their upstream models in dependency order (module docstring). The caller
    drops `ProjectRun.relations` when it is done with them (also when this raises: they are kept as made)."""
    run = ProjectRun(selected=frozenset(upstream(project, targets)))
    started = time.perf_counter()
    usage = Usage()
    try:
        _build(engine, project, run, usage, sources, task_dialect, deadline)
    except BaseException:
        for relation in run.relations.values():
            engine.drop_staged(relation.table)
        raise
    finally:
        run.timings["run"] = time.perf_counter() - started
    run.usage = usage if usage else None
    return run


def _build(engine: CandidateEngine, project: ValidatedProject, run: ProjectRun, usage: Usage,
           sources: Mapping[tuple[str, str], str], task_dialect: str, deadline: Deadline) -> None:  # fmt: skip
    for name in dependency_order(project, run.selected):
        model = project.models[name]
        if not model.enabled:
            raise EvaluationError(f"dbt could not run the project: model {name} is disabled but selected")
        if any(r in run.errors for r in model.refs):
            run.errors[name] = "skipped: an upstream model failed"
            continue
        try:
            tree = model_tree(model, run.relations, sources)
            run.relations[name], billed = _materialise(engine, tree, deadline)
        except EvaluationTimeout:
            raise
        except (EvaluationError, CandidateRejected, SqlglotError) as error:  # the model's failure, as dbt's
            run.errors[name] = one_line(f"error: {model.path}: {error}")
            continue
        if billed is not None:
            usage.merge(billed)


def _materialise(
    engine: CandidateEngine, tree: exp.Expression, deadline: Deadline
) -> tuple[Relation, Usage | None]:
    """The model's table; with AI calls, the table holds their bill's columns too, read here once."""
    metered = engine.meter(tree)
    table = engine.create_table(metered.query.sql(dialect=engine.dialect), deadline.left())
    if not metered.sites:
        return Relation(table), None
    shown = engine.query(f"SELECT * FROM {table} LIMIT 0", deadline.left()).columns
    bill = {c.lower() for c in metered.columns}
    columns = tuple(c for c in shown if c.lower() not in bill)
    found = engine.query(f"SELECT {', '.join(metered.columns)} FROM {table}", deadline.left())
    index = {c.lower(): k for k, c in enumerate(found.columns)}
    values = {c: [row[index[c.lower()]] for row in found.rows] for c in metered.columns if c.lower() in index}
    return Relation(table, columns), metered.usage(values, engine.billed_model)


def read_targets(
    engine: CandidateEngine,
    project: ValidatedProject,
    run: ProjectRun,
    targets: Sequence[str],
    deadline: Deadline,
) -> dict[str, pd.DataFrame]:
    """Each built target's rows, its columns named as the model writes them (the warehouse folds unquoted names
    to upper case; DuckDB, whose rows dbt's runner reads, keeps them as written)."""
    models = {}
    for target in targets:
        relation = run.relations.get(target)
        if relation is None:
            continue
        found = engine.query(f"SELECT * FROM {relation.sql(engine.dialect)}", deadline.left())
        written = {c.lower(): c for c in project.models[target].columns or ()}
        columns = [written.get(c.lower(), c) for c in found.columns]
        models[target] = pd.DataFrame.from_records(found.rows, columns=columns)
    return models


def upstream(project: ValidatedProject, targets: Sequence[str]) -> set[str]:
    """The targets and every model they read, directly or not (dbt's ``+target``)."""
    seen: set[str] = set()
    stack = [t for t in targets if t in project.models]
    while stack:
        name = stack.pop()
        if name not in seen:
            seen.add(name)
            stack.extend(r for r in project.models[name].refs if r in project.models)
    return seen


def dependency_order(project: ValidatedProject, names: set[str]) -> list[str]:
    """`names` in an order where each model comes after those it refs (the validator refused cycles)."""
    order: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> None:
        if name in done:
            return
        done.add(name)
        for ref in sorted(project.models[name].refs):
            if ref in names:
                visit(ref)
        order.append(name)

    for name in sorted(names):
        visit(name)
    return order


def enabled(project: ValidatedProject, model: ValidatedModel) -> bool:
    """The model's effective ``enabled`` (`validate.model_config`: in the model, its property file, or
    dbt_project.yml)."""
    return model.enabled


def run_result(
    models: Mapping[str, pd.DataFrame], tests: Sequence[Any], run: ProjectRun, timings: Mapping[str, float]
) -> DbtRunResult:
    """The run as dbt's runner reports one (`runner.DbtRunResult`), so the same code scores both."""
    return DbtRunResult(dict(models), tuple(tests), dict(run.errors), {**run.timings, **timings})
