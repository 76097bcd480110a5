"""The packs made from real public dbt projects (issue 39: tasks/sushi_dbt, from the SQLMesh sdist on PyPI, and
tasks/airbnb_dbt, from the ade-bench sdist on PyPI), through `coco-sql init dbt` as a user runs it.

- `coco-sql init dbt` turns each pack's upstream project folder into the task the pack holds, with no hand
  edit: the same task.toml (keys, entity, follow rules, targets), refusing the targets that aggregate over the
  cut tables, and the task folder is found again by the project's path;
- the task's splits are consistent: the project without its planted defects scores 1.0 on every split, the
  seed (the upstream folder) under 0.6 (slow: it starts dbt).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from coco_sql.cli import run
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.tasks import load_task

TASKS = Path(__file__).resolve().parents[1] / "tasks"
# pack -> (its --target options, its other init options, a line the report must hold)
PACKS = {
    "sushi_dbt": (
        ("customer_revenue_by_day", "waiter_revenue_by_day", "waiter_as_customer_by_day", "customers",
         "top_waiters"),
        (),
        "refused: target customers: its rows cannot be split by dbt_seeds.items.ds",
    ),
    "airbnb_dbt": (
        ("daily_agg_reviews", "dim_listings_hosts:LISTING_ID", "monthly_agg_reviews"),
        ("--entity", "airbnb.reviews.DATE"),
        "refused: target monthly_agg_reviews: its rows cannot be split by airbnb.reviews.DATE",
    ),
}  # fmt: skip
SLOW = {"airbnb_dbt"}  # its init reads a DuckDB file of 15,000 rows (~5 s): the CI tier keeps sushi_dbt's


def _init(pack: str, project: Path, *extra: str) -> int:
    targets, options, _ = PACKS[pack]
    chosen = [a for t in targets for a in ("--target", t)]
    return run(["init", "dbt", str(project), "--expected", str(TASKS / pack / "golden"), "--no-score",
                "--name", pack, *chosen, *options, *extra])  # fmt: skip


def _packs() -> list:  # type: ignore[type-arg]
    return [pytest.param(p, marks=pytest.mark.slow) if p in SLOW else p for p in sorted(PACKS)]


@pytest.mark.parametrize("pack", _packs())
def test_init_dbt_makes_the_pack_from_its_upstream_folder(pack: str, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    project = tmp_path / "project"
    shutil.copytree(TASKS / pack / "upstream", project)
    assert _init(pack, project) == 0
    report = capsys.readouterr().out
    made = project / ".coco" / pack / "task.toml"
    mine, committed = (tomllib.loads(p.read_text()) for p in (made, TASKS / pack / "task.toml"))
    assert mine["program"].pop("seed") == "../.." and committed["program"].pop("seed") == "upstream"
    assert mine == committed
    assert PACKS[pack][2] in report
    task = load_task(project)  # found by the project's path
    assert task.name == pack and task.kind_data.seed_dir == project.resolve()
    assert _init(pack, project) == 2  # a second init does not overwrite the first without --force


@pytest.mark.slow
@pytest.mark.parametrize("pack", sorted(PACKS))
def test_the_pack_without_its_defects_scores_one_on_every_split(pack: str) -> None:
    from coco_sql.evaluate.evaluator import Evaluator

    task = load_task(TASKS / pack)
    seed = DbtProject.from_text(task.seed_program)
    solution = DbtProject.from_dir(TASKS / pack / "solution")
    evaluator = Evaluator(task, ("train", "val", "test"))
    try:
        assert evaluator.evaluate(seed.to_text(), "train").score < 0.6
        for split in ("train", "val", "test"):
            assert evaluator.evaluate(solution.to_text(), split).score == 1.0
    finally:
        evaluator.close()
