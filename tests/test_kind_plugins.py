"""Kinds are plug-ins (issue 28): a third kind that lives in tests/ registers through the entry point group
`coco_sql.languages`, and evolves, resumes, exports and reports with no file under coco_sql/ knowing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from coco_sql import api
from coco_sql.errors import ConfigError, TaskError
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
