"""`coco-sql init dbt` reads an expected CSV's cells as written: a 't'/'f' text column stays text (DuckDB's CSV
reader would guess BOOLEAN, and a model's 'f' would then never agree with the expected false), and the task's
rows agree with the model's text cells (found on tasks/airbnb_dbt: `IS_SUPERHOST`)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pandas as pd

from coco_sql.cli import run
from coco_sql.languages.dbt.compare import row_share
from coco_sql.tasks import load_task


def test_an_expected_csv_of_t_and_f_texts_stays_text(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("name: hosts\nprofile: hosts\nconfig-version: 2\n")
    (project / "profiles.yml").write_text(
        "hosts:\n  target: dev\n  outputs:\n    dev:\n      type: duckdb\n      path: w.duckdb\n"
    )
    (project / "models" / "sources.yml").write_text(
        "version: 2\nsources:\n  - name: raw\n    schema: main\n    tables:\n      - name: hosts\n"
    )
    (project / "models" / "dim_hosts.sql").write_text(
        "select id as host_id, superhost from {{ source('raw', 'hosts') }}"
    )
    rows = pd.DataFrame({"id": range(1, 41), "superhost": ["t" if i % 3 else "f" for i in range(1, 41)]})
    with duckdb.connect(str(project / "w.duckdb")) as con:
        con.execute("CREATE TABLE main.hosts AS SELECT * FROM rows")
    rows.rename(columns={"id": "host_id"}).to_csv(tmp_path / "dim_hosts.csv", index=False)
    code = run(["init", "dbt", str(project), "--expected", str(tmp_path / "dim_hosts.csv"), "--no-score",
                "--target", "dim_hosts:host_id"])  # fmt: skip
    assert code == 0
    expected = pd.read_parquet(project / ".coco" / "hosts" / "expected" / "dim_hosts.parquet")
    assert expected["superhost"].tolist()[:3] == ["t", "t", "f"]
    task = load_task(project)
    assert task.name == "hosts"
    assert row_share({"host_id": 3, "superhost": True}, {"host_id": 3, "superhost": "true"}, {}) == 1.0
