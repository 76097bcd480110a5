"""A dbt pack evolved from SQL (`coco_sql.connect`, `coco_evolve`), exported, reported and checked for Snowflake,
on real dbt and DuckDB:

- `FROM coco_evolve('jaffle_shop', 3, ...)` runs the dbt pack: the champion beats the seed on validation and
  test rows, and `coco_progress` ends finished;
- `coco_export(1, 'dbt_project')` returns the project folder as text; a form dbt has not is one line;
- `coco_report(1)` draws the champion's model DAG (sources -> staging -> marts, the edited models marked) and a
  diff per changed file, not one diff of the whole text;
- check-deploy checks each model of the champion for Snowflake: none of jaffle_shop's has a finding, and a
  model using a function Snowflake lacks is named by its file;
- the champion, a project of more than 8 KB (mostly YAML and docs), gets no SQL size warning.
"""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

import coco_sql
from coco_sql import api
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.tasks import load_task

pytest.importorskip(
    "dbt.adapters.duckdb",
    reason="dbt is not installed: pip install 'coco-sql[dbt]' (dbt-core 1.11, dbt-duckdb 1.11)",
)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("dbt_sql") / "runs.duckdb"
    con = coco_sql.connect(db)
    summary = con.sql("FROM coco_evolve('jaffle_shop', 3, {'seed': 1})").df().iloc[0]
    assert summary.task == "jaffle_shop" and summary.iterations == 3
    # three repairs (per-column and per-target scoring since issue 39)
    assert summary.champion_val_score > summary.seed_val_score + 0.1
    assert summary.champion_test_score > summary.seed_test_score + 0.1
    assert con.execute("SELECT phase, iteration FROM coco_progress").fetchall() == [("finished", 3)]
    con.close()
    return db


def test_the_champion_exports_as_a_project_and_a_form_dbt_lacks_is_one_line(run_db: Path) -> None:
    con = coco_sql.connect(run_db)
    code = con.execute("SELECT code FROM coco_export(1, 'dbt_project')").fetchone()[0]
    assert "-- file: profiles.yml\n" in code and "-- file: models/staging/stg_payments.sql\n" in code
    with pytest.raises(duckdb.Error) as raised:
        con.execute("FROM coco_export(1, 'snowflake_view')").fetchall()
    assert "a dbt program exports as dbt_project, dbt_patch (got 'snowflake_view')" in str(raised.value)
    assert "\n" not in str(raised.value).strip()
    con.close()


def test_the_report_draws_the_model_dag_and_a_diff_per_changed_file(run_db: Path) -> None:
    con = coco_sql.connect(run_db)
    html = con.execute("SELECT html FROM coco_report(1)").fetchone()[0]
    con.close()
    svg = html[html.index('<svg class="dag"') : html.index("</svg>", html.index('<svg class="dag"'))]
    assert svg.count('class="dag-edge"') == 8 and svg.count("dag-node dag-source") == 3
    marked = sorted(re.findall(r'<g class="dag-node dag-model dag-changed"><title>(\w+) ', svg))
    files = re.findall(r"<summary><code>([^<]+)</code> <span class=\"muted\">changed", html)
    # the three repairs (the amount scaled where it is read and the payment method passed through, both in
    # stg_payments; the order status's CASE in stg_orders): each changed file is a marked node of the DAG
    assert marked == ["stg_orders", "stg_payments"]
    assert sorted(f.rsplit("/", 1)[-1].removesuffix(".sql") for f in files) == marked


def test_check_deploy_checks_every_model_of_the_champion_for_snowflake(run_db: Path) -> None:
    assert api.check_deploy(1, db=run_db) == []
    task = load_task("jaffle_shop")
    champion = api.export(1, db=run_db)
    project = DbtProject.from_text(champion.code)
    changed = project.replace(
        {"models/orders.sql": project.files["models/orders.sql"].replace("select", "select now() as at,", 1)}
    )
    findings = api.check_deploy(code=changed.to_text(), task=task, db=run_db)
    assert [f.line() for f in findings] == [
        "program models/orders.sql: NOW: function NOW does not exist in Snowflake (not in coco-sql's Snowflake "
        "function catalogue)"
    ]


def test_a_dbt_champion_gets_no_sql_size_warning(run_db: Path) -> None:
    """The 8 KB warning is the SQL kind's (`KindPlugin.warn_bytes`): a dbt project of 8.7 KB, mostly YAML and
    docs, is not 'KB of SQL' with inline examples."""
    with duckdb.connect(str(run_db), read_only=True) as con:
        (smallest,) = con.execute("SELECT min(length(code)) FROM programs WHERE run_id = 1").fetchone()
    assert smallest > 8 * 1024  # the champion among them
    assert api.champion_warnings(1, db=run_db) == []
