"""The report's view of a program of several files (`report.parts`), with the dbt kind's hook
(`languages.dbt.report_parts`): no dbt needed, the graph is read from the models' Jinja without rendering it.

- the jaffle_shop seed's graph: sources -> staging models -> marts, in three layers;
- seed against solution: exactly the files that differ get a highlighted diff, and exactly their models are
  marked in the SVG; unchanged files are counted, not shown;
- a kind without the hook gets no parts (the report shows its one-text diff), a text that is no project neither;
- a ref built at render time is not drawn, and a cycle (which validation refuses) still lays out.
"""

from __future__ import annotations

import re

from dbt_cases import JAFFLE

from coco_sql.languages.base import ProgramParts
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.report_parts import program_parts
from coco_sql.report.parts import graph_svg, layers, parts_view

SEED = DbtProject.from_dir(JAFFLE / "seed")
SOLUTION = DbtProject.from_dir(JAFFLE / "solution")


def test_the_graph_of_a_project_runs_from_sources_through_staging_to_marts() -> None:
    parts = program_parts(SEED.to_text())
    assert parts is not None and dict(parts.files) == dict(SEED.files)
    kinds = {name: kind for name, kind, _ in parts.nodes}
    assert kinds["jaffle_shop.raw_orders"] == "source" and kinds["stg_orders"] == "model"
    assert {
        ("jaffle_shop.raw_orders", "stg_orders"),
        ("stg_orders", "orders"),
        ("stg_payments", "customers"),
    } <= set(parts.edges)
    depth = layers(parts)
    assert {
        depth[n] for n in ("jaffle_shop.raw_customers", "jaffle_shop.raw_orders", "jaffle_shop.raw_payments")
    } == {0}
    assert {depth[n] for n in ("stg_customers", "stg_orders", "stg_payments")} == {1}
    assert depth["customers"] == depth["orders"] == 2


def test_seed_to_solution_shows_each_changed_file_and_marks_its_model() -> None:
    view = parts_view("dbt", SEED.to_text(), SOLUTION.to_text())
    assert view is not None
    changed = [p for p in sorted(SEED.files) if SEED.files[p] != SOLUTION.files[p]]
    assert [f["path"] for f in view["files"]] == changed == [
        "models/customers.sql", "models/staging/stg_orders.sql", "models/staging/stg_payments.sql"
    ]  # fmt: skip
    assert all(f["status"] == "changed" and f["diff"].added and f["diff"].removed for f in view["files"])
    assert view["unchanged"] == len(SEED.files) - 3
    marked = re.findall(r'<g class="dag-node dag-model dag-changed"><title>(\w+) ', view["svg"])
    assert sorted(marked) == ["customers", "stg_orders", "stg_payments"]
    assert view["nodes"] == 8 and view["svg"].count('class="dag-edge"') == view["edges"]


def test_no_parts_for_a_kind_without_the_hook_or_a_text_that_is_no_project() -> None:
    assert parts_view("sql", "select 1", "select 2") is None
    assert program_parts("select id from input") is None


def test_a_ref_built_at_render_time_is_not_drawn_and_a_cycle_still_lays_out() -> None:
    project = SEED.replace({"models/extra.sql": "{% set m = 'orders' %}select * from {{ ref(m) }}\n"})
    parts = program_parts(project.to_text())
    assert parts is not None and not [e for e in parts.edges if e[1] == "extra"]
    cycle = ProgramParts({}, (("a", "model", None), ("b", "model", None)), (("a", "b"), ("b", "a")))
    assert sorted(layers(cycle).values()) == [0, 1]
    assert graph_svg(cycle, set()).count("<rect") == 2
