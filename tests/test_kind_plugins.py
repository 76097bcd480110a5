"""Kinds are plug-ins (issue 28): a third kind that lives in tests/ registers through the entry point group
`coco_sql.languages`, and evolves, resumes, exports and reports with no file under coco_sql/ knowing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from coco_sql import api
from coco_sql.engine.registry import kind_settings, mutator_spec
from coco_sql.errors import ConfigError, TaskError
from coco_sql.languages.kind import OfflineSettings
from coco_sql.plugins import BUILTIN_KINDS, KIND_GROUP, kind, kind_names

PACKAGE = Path(__file__).resolve().parents[1] / "coco_sql"


@pytest.fixture
def toy_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution that declares the toy kind: its metadata on sys.path, as pip leaves it."""
    info = tmp_path / "site" / "coco_toy_kind-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: coco-toy-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{KIND_GROUP}]\ntoy = tests.toy_kind:PLUGIN\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return tmp_path


def _toy_pack(root: Path) -> Path:
    pack = root / "toy_task"
    (pack / "data").mkdir(parents=True)
    rows = ["id,x,label", *(f"r{i},{i % 30},{int(i % 30 >= 12)}" for i in range(120))]
    (pack / "data" / "pool.csv").write_text("\n".join(rows) + "\n")
    (pack / "seed.toy").write_text("threshold x 4\n")
    (pack / "task.toml").write_text(
        'name = "toy_task"\ndescription = "label rows whose x is at least a threshold"\nlanguage = "toy"\n'
        '[data]\npool = "data/pool.csv"\nexpected_column = "label"\n[data.input_columns]\nx = "INTEGER"\n'
        "[splits]\nseed = 7\ntrain_fraction = 0.5\ntest_fraction = 0.25\n"
        '[contract]\noutput = "label"\ntype = "INTEGER"\n[scorer]\nkind = "exact"\n[program]\nseed = "seed.toy"\n'
    )
    return pack


def test_a_kind_from_an_entry_point_evolves_resumes_exports_and_reports(toy_installed: Path) -> None:
    assert "toy" in kind_names() and "toy" not in BUILTIN_KINDS
    pack = _toy_pack(toy_installed)
    db = toy_installed / "toy.duckdb"
    first = api.evolve(pack, db=db, budget=4, options={"seed": 3})
    resumed = api.resume(first.run_id, db=db, task=pack, budget=10)
    whole = api.evolve(pack, db=toy_installed / "whole.duckdb", budget=10, options={"seed": 3})

    assert resumed.best_id == whole.best_id and resumed.best_val_score == whole.best_val_score
    assert whole.best_val_score > whole.seed_val_score  # the kind's own mutator found better programs
    champion = api.export(first.run_id, db=db)
    assert champion.language == "toy" and champion.code.startswith("threshold x ")
    with pytest.raises(ConfigError, match="does not export toy programs"):
        api.export(first.run_id, db=db, form="duckdb_view")
    page = api.report(first.run_id, db=db)
    assert (
        "threshold x" in page.html and "dialect" not in page.html.split("Champion code")[1].split("</h2>")[0]
    )


def test_the_toy_kind_is_unknown_without_its_distribution() -> None:
    assert "toy" not in kind_names()
    with pytest.raises(TaskError, match="unknown language 'toy' \\(known: sql, python"):
        kind("toy", task="toy_task")
    for path in PACKAGE.rglob("*"):
        if path.suffix in {".py", ".j2", ".toml"}:
            assert "toy_kind" not in path.read_text(), path


def test_a_kinds_own_task_option_and_offline_setting_reach_coco_help(toy_installed: Path) -> None:
    """A fifth kind is one folder plus one entry point (issue 41): the toy's own coco_task option (`start`) and
    its own offline setting (`step`) are printed by `CALL coco_help(...)` in a real DuckDB, with no file under
    coco_sql/ naming them (`test_the_toy_kind_is_unknown_without_its_distribution`); another kind refuses the
    toy's setting in one line."""
    import coco_sql
    from tests.toy_kind import TASK_OPTIONS, ToySettings

    con = coco_sql.connect(toy_installed / "toy_help.duckdb")
    task = con.execute("FROM coco_help('coco_task')").df().fillna("").to_dict("records")
    start = {
        **TASK_OPTIONS.rows()[1],
        "name": "options.start",
        "doc": "kind toy: the seed program's threshold",
    }
    assert start in task and [r["name"] for r in task].count("options.kind") == 1
    assert any(r["name"] == "options.entity" and r["doc"].startswith("kind dbt: ") for r in task)
    assert (
        con.execute("FROM coco_help('coco_task toy')").df().fillna("").to_dict("records")
        == TASK_OPTIONS.rows()
    )
    offline = {r["name"]: r for r in con.execute("FROM coco_help('offline mutator')").df().to_dict("records")}
    assert list(offline) == ["max_drafts", "probe", "max_examples", "step"]
    assert offline["step"]["doc"] == "how far the toy mutator moves a threshold (toy tasks only)"
    assert offline["step"]["range"] == "[1, 9]" and ToySettings().step == 1

    settings = mutator_spec("offline").settings({"step": 2})  # checked against every kind's: a python task's
    with pytest.raises(ConfigError, match="setting 'step' is not one of a python task's"):
        kind_settings("python", OfflineSettings, settings)


@pytest.mark.slow
def test_a_kinds_own_task_option_and_offline_setting_work_in_a_run(toy_installed: Path) -> None:
    """The toy's option `start` and setting `step` through a real DuckDB: `CALL coco_task` registers a toy task
    over a table with the kind's registrar, and `CALL coco_evolve` moves every child by the toy's `step`."""
    import coco_sql

    con = coco_sql.connect(toy_installed / "toy_run.duckdb")
    con.execute("CREATE TABLE pool AS SELECT 'r' || i AS id, i % 30 AS x, (i % 30 >= 12)::INTEGER AS label "
                "FROM range(120) t(i)")  # fmt: skip
    assert con.execute("CALL coco_task('toy_rows', 'pool', {'kind': 'toy', 'start': 4})").fetchone()[:2] == (
        "toy_rows",
        120,
    )
    con.execute("CALL coco_evolve('toy_rows', 3, {'seed': 3, 'mutator_settings': {'step': 3}})").fetchall()
    codes = {r[0] for r in con.execute("SELECT code FROM programs").fetchall()}
    assert "threshold x 4" in {c.strip() for c in codes} and len(codes) > 1
    assert all(abs(int(c.split()[-1]) - 4) % 3 == 0 for c in codes)  # every child moved by the toy's step
    with pytest.raises(Exception, match=r"setting 'step' must be an integer in \[1, 9\]"):
        con.execute("CALL coco_evolve('toy_rows', 3, {'mutator_settings': {'step': 10}})").fetchall()
