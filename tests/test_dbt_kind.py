"""dbt projects as a program kind (issue 29): the pack loader, the per-instance scores, the repair mutator's
evidence and edits, and the dbt_project export run by plain `dbt build`.

- a dbt pack loads: one instance per expected key and per seed data test, keys split by customer, each split's
  sources hold only its own customers, their orders and those orders' payments;
- an expected table lacking its key is one TaskError line;
- the seed scores under half on the training keys and the solution 1.0, through the evaluator and the dbt
  sandbox; a project that does not compile, refs a missing model, reads a file or has bad YAML is rejected
  with one line;
- the evidence of the seed's training rows points at a unit of 100, and the heaviest edit, scored on the
  training keys, gains over the seed;
- the champion exported as dbt_project runs with plain `dbt build` in a fresh folder and reproduces the
  expected marts; an export into a folder that holds files writes nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from dbt_cases import JAFFLE

from coco_sql.errors import CandidateRejected, ConfigError, TaskError
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.tasks import load_task


def test_a_dbt_pack_loads_with_instances_per_key_and_test() -> None:
    task = load_task(JAFFLE)
    assert task.language == "dbt"
    train, val, test = (task.split(name) for name in ("train", "val", "test"))
    keys = [{i for i in s.expected if ":" in i and not i.startswith("test:")} for s in (train, val, test)]
    assert not (keys[0] & keys[1]) and not (keys[0] & keys[2]) and not (keys[1] & keys[2])
    assert {i for i in train.expected if "#" in i} == {
        "customers#extra",
        "orders#extra",
    }  # extra rows, per target
    assert sum(len(k) for k in keys) == 1500 + 1522  # every expected row of both marts is an instance
    tests = [i for i in train.expected if i.startswith("test:")]
    assert len(tests) == 20 and "test:not_null:customers.customer_id" in tests
    sources = task.kind_data.sources["train"]
    customers = set(sources["jaffle_shop.raw_customers"]["id"].astype(str))
    assert {i.split(":")[1] for i in keys[0] if i.startswith("customers:")} == customers
    assert set(sources["jaffle_shop.raw_orders"]["user_id"].astype(str)) <= customers
    orders = set(sources["jaffle_shop.raw_orders"]["id"])
    assert set(sources["jaffle_shop.raw_payments"]["order_id"]) <= orders


def test_an_expected_table_lacking_its_key_is_one_line(tmp_path: Path) -> None:
    pack = tmp_path / "jaffle_shop"
    shutil.copytree(JAFFLE, pack, ignore=shutil.ignore_patterns("reference", "solution"))
    frame = pd.read_csv(pack / "expected" / "orders.csv").rename(columns={"order_id": "id"})
    frame.to_csv(pack / "expected" / "orders.csv", index=False)
    with pytest.raises(TaskError) as raised:
        load_task(pack)
    message = str(raised.value)
    assert "\n" not in message and "orders.csv has no column 'order_id'" in message


pytest.importorskip(
    "dbt.adapters.duckdb",
    reason="dbt is not installed: pip install 'coco-sql[dbt]' (dbt-core 1.11, dbt-duckdb 1.11)",
)


@pytest.fixture(scope="module")
def evaluator() -> Iterator[object]:
    from coco_sql.evaluate.evaluator import Evaluator

    judge = Evaluator(load_task(JAFFLE), splits=("train",))
    yield judge
    judge.close()


@pytest.mark.slow
def test_seed_under_half_and_solution_whole_on_training_keys(evaluator) -> None:  # type: ignore[no-untyped-def]
    seed = evaluator.evaluate(evaluator.task.seed_program, "train")
    solution = evaluator.evaluate(DbtProject.from_dir(JAFFLE / "solution").to_text(), "train")
    assert seed.error is None and seed.score < 0.7  # partial credit: most columns of most rows agree
    whole = sum(1 for i, s in zip(seed.ids, seed.scores, strict=True) if ":" in i and s == 1.0)
    assert whole < 0.1 * len(seed.ids)  # but few rows agree on every column
    assert solution.error is None and solution.score == 1.0


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"models/customers.sql": "select customer_id from {{ ref('stg_customer') }}\n"}, "names no model"),
        ({"models/customers.sql": "select customer_id,, from {{ ref('stg_customers') }}\n"}, "customers.sql"),
        ({"models/customers.sql": "select * from read_csv('/etc/passwd')\n"}, "READ_CSV is not allowed"),
        (
            {"models/schema.yml": "version: 2\nmodels:\n  - name: customers\n   columns: [\n"},
            "YAML does not parse",
        ),
    ],
)
def test_a_bad_project_is_rejected_with_one_line(evaluator, change: dict[str, str], expected: str) -> None:  # type: ignore[no-untyped-def]
    project = DbtProject.from_dir(JAFFLE / "solution").replace(change)
    with pytest.raises(CandidateRejected) as raised:
        evaluator.check(project.to_text())
    assert expected in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.slow
def test_the_evidence_points_at_the_unit_and_its_edit_gains(evaluator) -> None:  # type: ignore[no-untyped-def]
    from coco_sql.languages.dbt.edits import hypotheses
    from coco_sql.languages.dbt.evidence import Evidence
    from coco_sql.languages.dbt.validate import validate_project

    code = evaluator.task.seed_program
    seed = evaluator.evaluate(code, "train")
    evidence = Evidence.of(list(seed.ids), list(seed.outputs), list(seed.expected))
    factor, columns = evidence.scale()
    assert factor == 100.0 and {"amount", "customer_lifetime_value"} <= columns
    assert evidence.missing["customers"] > 0  # the inner join drops customers without orders
    edits = hypotheses(
        DbtProject.from_text(code), validate_project(code, evaluator.task.kind_data.spec), evidence, "duckdb"
    )
    assert any(e.approach.startswith("scale") for e in edits[:4])
    best = max(evaluator.evaluate(e.code, "train").score for e in edits[:4])
    assert best > seed.score + 0.1


@pytest.mark.slow
def test_the_exported_project_runs_with_plain_dbt_build(tmp_path: Path) -> None:
    from coco_sql.languages.dbt.export import export_text, write_export

    task = load_task(JAFFLE)
    text = export_text(DbtProject.from_dir(JAFFLE / "solution").to_text(), "dbt_project", task)
    folder = tmp_path / "champion"
    write_export(text, folder)
    build = subprocess.run(
        [sys.executable, "-c", "from dbt.cli.main import cli; cli()", "build", "--profiles-dir", ".",
         "--no-send-anonymous-usage-stats", "--no-version-check"],
        cwd=folder, capture_output=True, text=True, timeout=600, env={"PATH": "/usr/bin:/bin", "DO_NOT_TRACK": "1"},
    )  # fmt: skip
    assert build.returncode == 0, build.stdout[-2000:]
    with duckdb.connect(str(folder / "coco.duckdb"), read_only=True) as con:
        customers = con.execute(
            "select count(*), round(sum(customer_lifetime_value), 2) from customers"
        ).fetchone()
    expected = pd.read_csv(JAFFLE / "expected" / "customers.csv")
    assert customers == (len(expected), round(expected["customer_lifetime_value"].sum(), 2))
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    with pytest.raises(ConfigError):
        write_export(text, taken)
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
