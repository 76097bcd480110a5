"""Validate a dbt project as an untrusted program, and produce the form the runner hands to dbt.

The checks, in order, each failing with one line that names the file and the problem:

1. the tree (`project`): allowed paths, sizes, a dbt_project.yml;
2. the YAML (`yaml_check`): every key on an allow-list, sources declared, generic tests only;
3. the Jinja (`render`): ref / source / config / var and the project's macros, rendered by us in a sandbox;
   a ref to a missing model or an undeclared source fails here;
4. the graph: model names are identifiers, refs form no cycle, targets exist and are not ephemeral;
5. each rendered model, with the SQL candidates' own checks from `sqlkit.validate` (one read-only query,
   allow-listed functions with their arity, no sampling or parameters, no file or table functions) where the
   relations a model may read are its declared refs and sources (rendered as placeholders) and its own CTEs;
   with the sources' columns known, every column must resolve (the models' columns are inferred in
   dependency order) and each target model must return the columns the task compares.

What passes becomes the run form (`ValidatedProject.run_files`, written by `run_form`): each model is the checked
DuckDB SQL (Snowflake programs transpiled, AI calls bound to the sandbox's UDFs) as sqlglot wrote it, with the
relations it reads written as our own ``{{ ref() }}`` / ``{{ source() }}`` and every other ``{`` made inert; one
properties file of checked values (sources, each model's effective config, its generic tests); dbt_project.yml
rebuilt with our profile; no macros (already expanded), docs or descriptions. dbt thus never renders a character
the validator did not render: `run_form.audit` checks the form before dbt reads it, and
tests/test_dbt_differential.py compares what dbt compiles with what was checked, model by model. A rendered model
that still holds ``{{``, ``{%`` or ``{#`` outside a string literal (in a comment, an identifier) is refused.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import duckdb
from sqlglot import exp
from sqlglot.errors import OptimizeError
from sqlglot.optimizer.qualify import qualify

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt import run_form
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.render import REF_PREFIX, SEEDS, SOURCE_PREFIX, RenderedModel, render_models
from coco_sql.languages.dbt.run_form import Relation
from coco_sql.languages.dbt.yaml_check import ProjectYaml, check_yaml
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.ai_binding import UDFS, bind_ai_calls
from coco_sql.sqlkit.bounds import recursion_guard
from coco_sql.sqlkit.checks import ValidationSpec, checked_trees
from coco_sql.sqlkit.rejection import one_line

_PLACEHOLDER = re.compile(rf"""(['"]?)\b((?:{REF_PREFIX}|{SOURCE_PREFIX})\d+)\b\1""")
# a placeholder as sqlglot writes it in a relation's place: bare, or as a quoted identifier
_RELATION_NAME = re.compile(
    rf'"((?:{REF_PREFIX}|{SOURCE_PREFIX})\d+)"|\b((?:{REF_PREFIX}|{SOURCE_PREFIX})\d+)\b', re.I
)
_NO_RELATION = "__coco_no_relation"
UNKNOWN_TYPE = "UNKNOWN"


def enables_ai(functions: Iterable[str]) -> bool:
    """Whether a dbt task's models may call AI: it enables an AI function (`KindPlugin.uses_ai`)."""
    return any(name in UDFS or name == "PROMPT" for name in functions)


@dataclass(frozen=True)
class DbtSpec:
    """What a task allows a project: its SQL dialect, extra functions (AI), the sources' columns (optional: enables
    column checks) and, per target model, the columns it must return."""

    dialect: str = SANDBOX_DIALECT
    allowed_functions: frozenset[str] = frozenset()
    source_columns: Mapping[tuple[str, str], Mapping[str, str]] | None = field(default=None, hash=False)
    targets: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    render_deadline_s: float = 5.0

    def as_message(self) -> dict[str, Any]:
        """The spec as plain data: the `spec` of `messages.DBT_PARENT`'s validate message."""
        sources = None
        if self.source_columns is not None:
            sources = [
                {"source": source, "table": table, "columns": list(columns.items())}
                for (source, table), columns in sorted(self.source_columns.items())
            ]
        return {
            "dialect": self.dialect,
            "allowed_functions": sorted(self.allowed_functions),
            "sources": sources,
            "targets": [(name, list(columns)) for name, columns in self.targets.items()],
            "render_deadline_s": self.render_deadline_s,
        }

    @classmethod
    def from_message(cls, message: Mapping[str, Any]) -> DbtSpec:
        """The spec of a checked `as_message` form."""
        sources = message["sources"]
        return cls(
            dialect=message["dialect"],
            allowed_functions=frozenset(message["allowed_functions"]),
            source_columns=None
            if sources is None
            else {(s["source"], s["table"]): dict(s["columns"]) for s in sources},
            targets={name: tuple(columns) for name, columns in message["targets"]},
            render_deadline_s=message["render_deadline_s"],
        )


@dataclass(frozen=True)
class ValidatedModel:
    """One checked model: the run form dbt reads (`run_sql`), the SQL the validator checked, what it reads, its
    effective config and columns."""

    name: str
    path: str
    run_sql: str  # the model's run-form file (`run_form.model_file`)
    materialized: str
    refs: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]
    columns: tuple[str, ...] | None  # None when the sources' columns were not given
    # the model as rendered, in the task's dialect with placeholder relations (its refs, sources and config())
    rendered: RenderedModel | None = field(default=None, compare=False, repr=False)
    # the DuckDB SQL the validator checked (and DuckDB parsed), placeholders in the relations' places: what dbt
    # must compile the model to, with only the relation names substituted (tests/test_dbt_differential.py)
    checked_sql: str = ""
    enabled: bool = True
    # the checked query in the task's dialect, AI calls not bound: what a warehouse runs (`compiled`)
    tree: exp.Query | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class ValidatedProject:
    project: DbtProject
    properties: ProjectYaml
    models: Mapping[str, ValidatedModel] = field(hash=False)

    def run_files(self, profile: str) -> dict[str, str]:
        """Path -> content of the project dbt runs (see the module docstring and `run_form`), audited."""
        entries = []
        for model in self.models.values():
            entry = dict(self.properties.run_models.get(model.name) or {"name": model.name})
            entry["config"] = {"materialized": model.materialized, "enabled": model.enabled}
            entries.append(entry)
        sources = {name: list(tables) for name, tables in self.properties.run_sources.items()}
        for model in self.models.values():  # the seeds the models read, as the task's sources
            for source, table in model.sources:
                if source == SEEDS and {"name": table} not in sources.setdefault(SEEDS, []):
                    sources[SEEDS].append({"name": table})
        files = {
            run_form.PROJECT_FILE: run_form.project_file(self.properties.name, profile),
            run_form.PROPERTIES: run_form.properties_file(sources, entries),
        }
        for model in self.models.values():
            files[model.path] = model.run_sql
        run_form.audit(files)
        return files


def validate_project(program: DbtProject | str, spec: DbtSpec | None = None) -> ValidatedProject:
    """Every check of the module docstring; the project ready to run, or `CandidateRejected` (one line)."""
    spec = spec or DbtSpec()
    project = program if isinstance(program, DbtProject) else DbtProject.from_text(program)
    properties = check_yaml(project)
    seeds = {key for key in spec.source_columns or {} if key[0] == SEEDS}  # ref('x') of a seed reads these
    rendered = render_models(
        project,
        declared_sources=properties.sources | seeds,
        variables=properties.variables,
        deadline_s=spec.render_deadline_s,
        project_name=properties.name,
    )
    order = _dependency_order(rendered)
    known_sources = dict(spec.source_columns) if spec.source_columns is not None else None
    if known_sources is not None:
        missing = sorted(properties.sources - set(known_sources))
        if missing:
            raise CandidateRejected(
                f"source {missing[0][0]}.{missing[0][1]} is declared but the task has no such table "
                f"(tables: {', '.join(f'{s}.{t}' for s, t in sorted(known_sources))})"
            )
    columns: dict[str, tuple[str, ...] | None] = {}
    models: dict[str, ValidatedModel] = {}
    parser = _duckdb_parser()
    checked = {name: _check_model(rendered[name], spec, known_sources, columns, parser) for name in order}
    for name in order:
        model = rendered[name]
        config = model_config(properties, model)
        check = checked[name]
        models[name] = ValidatedModel(
            name=name,
            path=model.path,
            run_sql=run_form.model_file(check.pieces),
            materialized=str(config["materialized"]),
            refs=tuple(dict.fromkeys(model.refs.values())),
            sources=tuple(dict.fromkeys(model.sources.values())),
            columns=check.columns,
            rendered=model,
            checked_sql=check.sql,
            enabled=bool(config["enabled"]),
            tree=check.tree,
        )
    _check_targets(models, spec)
    return ValidatedProject(project, properties, MappingProxyType({n: models[n] for n in sorted(models)}))


# ---------------------------------------------------------------------------------------------- the graph


def _dependency_order(rendered: Mapping[str, RenderedModel]) -> list[str]:
    """Models in an order where each comes after the models it refs; a cycle is refused."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        state[name] = 1
        for upstream in sorted(set(rendered[name].refs.values())):
            if state.get(upstream) == 1:
                cycle = " -> ".join([*path[path.index(upstream) :], upstream])
                raise CandidateRejected(f"{rendered[name].path}: the refs form a cycle: {cycle}")
            if upstream not in state:
                visit(upstream, [*path, upstream])
        state[name] = 2
        order.append(name)

    for name in sorted(rendered):
        if name not in state:
            visit(name, [name])
    return order


def model_config(properties: ProjectYaml, model: RenderedModel) -> dict[str, Any]:
    """``materialized`` and ``enabled`` as dbt resolves them: config() in the model, else the model's ``config:``
    in a property file, else the deepest folder config of dbt_project.yml, else dbt's defaults (view, enabled).
    The run form writes the result, so dbt and the validator read the same values."""
    found: dict[str, Any] = {"materialized": "view", "enabled": True}
    block: Any = properties.model_configs.get(properties.name) or {}
    for folder in [None, *model.path.split("/")[1:-1]]:
        if folder is not None:
            block = block.get(folder) if isinstance(block, Mapping) else None
        if not isinstance(block, Mapping):
            break
        for key in found:
            for written in (key, "+" + key):
                if written in block:
                    found[key] = block[written]
    for layer in (properties.file_configs.get(model.name) or {}, model.config):
        found.update({key: layer[key] for key in found if key in layer})
    if found["materialized"] not in ("view", "ephemeral"):  # incremental, table, external...: a full build
        found["materialized"] = "table"
    return found


def materialization(properties: ProjectYaml, model: RenderedModel) -> str:
    """The model's effective ``materialized`` (`model_config`)."""
    return str(model_config(properties, model)["materialized"])


def _check_targets(models: Mapping[str, ValidatedModel], spec: DbtSpec) -> None:
    for target, required in spec.targets.items():
        model = models.get(target)
        if model is None:
            raise CandidateRejected(
                f"the project has no model {target!r}, which the task scores (models: {', '.join(sorted(models))})"
            )
        if model.materialized == "ephemeral":
            raise CandidateRejected(f"{model.path}: model {target!r} is scored, so it cannot be ephemeral")
        if model.columns is not None:
            lowered = {c.lower() for c in model.columns}
            missing = [c for c in required if c.lower() not in lowered]
            if missing:
                raise CandidateRejected(
                    f"{model.path}: model {target!r} must return {', '.join(missing)}; it returns "
                    f"{', '.join(model.columns) or 'nothing'}"
                )


# ------------------------------------------------------------------------------------------- one model


@dataclass(frozen=True)
class _CheckedModel:
    sql: str  # the checked DuckDB SQL, placeholders for relations
    pieces: tuple[str | Relation, ...]  # the same text cut at its relations (`run_form.model_file`)
    columns: tuple[str, ...] | None
    tree: exp.Query  # the checked query in the task's dialect, AI calls not bound


def _check_model(
    model: RenderedModel,
    spec: DbtSpec,
    sources: Mapping[tuple[str, str], Mapping[str, str]] | None,
    upstream: dict[str, tuple[str, ...] | None],
    parser: duckdb.DuckDBPyConnection,
) -> _CheckedModel:
    """The SQL candidates' checks on one rendered model, then DuckDB's own parser on the SQL dbt will run (which
    must read it as one SELECT: sqlglot accepts, and writes back, text DuckDB refuses, e.g. ``IN (SELECT)``).
    Records the columns in `upstream`."""
    relations: dict[str, Mapping[str, str] | None] = {}
    for placeholder, name in model.refs.items():
        known = upstream.get(name)
        relations[placeholder] = None if known is None else dict.fromkeys(known, UNKNOWN_TYPE)
    for placeholder, key in model.sources.items():
        relations[placeholder] = None if sources is None else dict(sources[key])
    names = list(relations) or [_NO_RELATION]
    vspec = ValidationSpec(
        input_columns={},
        output_column="",
        allowed_functions=spec.allowed_functions,
        relation=names[0],
        dialect=spec.dialect,
        references={name: dict(relations.get(name) or {}) for name in names[1:]},
    )
    try:
        run_form.refuse_jinja_outside_literals(model.sql, spec.dialect)
        with recursion_guard("the model's SQL"):
            query, _, written = checked_trees(model.sql, vspec, wrap=False)
            tree = written.copy() if written is query else written
            columns = None
            if all(value is not None for value in relations.values()):
                columns = _columns(query, model, {k: v for k, v in relations.items() if v is not None})
            bind_ai_calls(query)
            sql = query.sql(dialect=SANDBOX_DIALECT, copy=False, pretty=True, comments=False)
            pieces = _restore_relations(sql, query, model)
        _check_duckdb_parses(sql, parser)
        upstream[model.name] = columns
        return _CheckedModel(sql, pieces, columns, tree)
    except CandidateRejected as error:
        raise CandidateRejected(_explain(str(error), model)) from None


_PARSERS = threading.local()


def _duckdb_parser() -> duckdb.DuckDBPyConnection:
    """This thread's DuckDB connection for parsing only (`extract_statements` reads no data): opening one costs
    about 70 ms, most of a small project's validation. It holds DuckDB's threads: a process that must fork
    single-threaded (a worker template) closes it first (`close_parser`)."""
    parser = getattr(_PARSERS, "connection", None)
    if parser is None:
        parser = _PARSERS.connection = duckdb.connect(":memory:")
    return parser


def close_parser() -> None:
    """Close this thread's parsing connection (and DuckDB's threads with it); the next validation opens one."""
    parser = getattr(_PARSERS, "connection", None)
    _PARSERS.connection = None
    if parser is not None:
        parser.close()


def _check_duckdb_parses(sql: str, parser: duckdb.DuckDBPyConnection) -> None:
    try:
        statements = parser.extract_statements(sql)
    except duckdb.Error as error:
        raise CandidateRejected(f"DuckDB cannot parse the model: {str(error).splitlines()[0]}") from None
    if len(statements) != 1 or statements[0].type != duckdb.StatementType.SELECT:
        kinds = ", ".join(str(s.type).rsplit(".", 1)[-1] for s in statements) or "nothing"
        raise CandidateRejected(f"DuckDB reads the model as {kinds}, not one SELECT")


def _columns(
    query: exp.Query, model: RenderedModel, relations: Mapping[str, Mapping[str, str]]
) -> tuple[str, ...]:
    """The model's output columns, with every column reference resolved; a relation read without an alias is
    named as dbt's rendered relation would be (the model's or the source table's name)."""
    tree = query.copy()
    for table in tree.find_all(exp.Table):
        if table.name in relations and not table.alias:
            label = model.refs.get(table.name) or model.sources[table.name][1]
            table.set("alias", exp.TableAlias(this=exp.to_identifier(label)))
    try:
        qualified = qualify(
            tree,
            schema={name: dict(columns) for name, columns in relations.items()},
            dialect=SANDBOX_DIALECT,
            validate_qualify_columns=True,
            quote_identifiers=False,
        )
    except OptimizeError as error:
        raise CandidateRejected(f"column check failed: {error}") from None
    names = list(qualified.named_selects) if isinstance(qualified, exp.Query) else []
    seen: set[str] = set()
    for name in names:
        if name.lower() in seen:
            raise CandidateRejected(f"the model returns column {name!r} twice")
        seen.add(name.lower())
    return tuple(names)


def _explain(message: str, model: RenderedModel) -> str:
    """A SQL check's message in a model's terms: placeholders read as ref()/source(), 'candidate' as 'model'."""
    text = _PLACEHOLDER.sub(lambda m: model.relation_label(m.group(2)), message)
    text = text.replace(
        f"only the relation '{_NO_RELATION}' and the query's own CTEs may be read",
        "the model has no ref or source, so it may read only its own CTEs",
    )
    if "only the relation" in text or "may read only its own CTEs" in text:
        text += "; read tables through {{ source('name', 'table') }} or {{ ref('model') }}"
    text = text.replace("a candidate must be", "a model must be").replace("candidate", "model")
    return one_line(f"{model.path}: {text}")


# -------------------------------------------------------------------------------------------- run form


def _restore_relations(sql: str, query: exp.Query, model: RenderedModel) -> tuple[str | Relation, ...]:
    """`sql` cut at its relations: each placeholder where the checked tree reads a relation (a table, or a
    column's table) becomes the `Relation` dbt resolves; the text between stays text (`run_form.model_file` makes
    it inert). A placeholder anywhere else (a string, an alias, a column's name: a macro can spell one) would turn
    into a relation that the validator did not check there, so it is refused."""
    known = {**{p: Relation(model=m) for p, m in model.refs.items()},
             **{p: Relation(source=s) for p, s in model.sources.items()}}  # fmt: skip
    expected = sum(
        1 for identifier in query.find_all(exp.Identifier) if _in_relation_place(identifier, known)
    )
    matches = list(_RELATION_NAME.finditer(sql))
    names = [(m.group(1) or m.group(2)).lower() for m in matches]
    if len(matches) != expected or any(name not in known for name in names):
        raise CandidateRejected(
            f"names starting with {REF_PREFIX!r} or {SOURCE_PREFIX!r} are reserved for ref() and source(); one "
            "appears outside a relation"
        )
    pieces: list[str | Relation] = []
    position = 0
    for match, name in zip(matches, names, strict=True):
        pieces += [sql[position : match.start()], known[name]]
        position = match.end()
    pieces.append(sql[position:])
    return tuple(piece for piece in pieces if piece != "")


def _in_relation_place(identifier: exp.Identifier, known: Mapping[str, Relation]) -> bool:
    """Whether `identifier` is a placeholder read as a relation: a table's name, or the table of a column."""
    if identifier.name.lower() not in known:
        return False
    parent = identifier.parent
    if isinstance(parent, exp.Table):
        return identifier is parent.this and not parent.db and not parent.catalog
    if isinstance(parent, exp.Column):
        return identifier is parent.args.get("table") and not parent.db and not parent.catalog
    return False
