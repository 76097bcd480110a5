"""The coding agent on a dbt project: the project is its workspace, through the tools it already has.

A scripted model (the test double of a remote provider) speaks the OpenAI wire format to `FakeEndpoint`, a real
HTTP server on 127.0.0.1, through coco-sql's real client. It plays an engineer on jaffle_shop: it reads the
candidate, queries the training split's sources, runs `test_draft`, reads from the answer which target and
column mismatch and by what factor, edits that one line of the staging model (its `search` scoped to the file
by the file's marker line, since the same line occurs in two files), tests again and commits. Every draft runs
on real dbt in the dbt sandbox; the child is scored on the validation keys by the run itself.

The pack is a copy whose validation and test expected rows carry unique markers (tests/leakage_probe.py):
nothing the model receives may hold one.
"""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from coco_sql import api
from coco_sql.agent.workspace import Workspace, WorkspaceError
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.llm import AiConfig
from coco_sql.llm.providers.base import ProviderLimits
from coco_sql.llm.routing import EndpointConfig
from coco_sql.plugins import kind
from coco_sql.store.records import EvaluationRow
from coco_sql.tasks import load_task
from tests import leakage_probe
from tests.llm_double import FakeEndpoint, Turn

ROOT = Path(__file__).resolve().parents[1]
PACK = ROOT / "tasks" / "jaffle_shop"
STAGING = "models/staging/stg_payments.sql"
MARKER = "-- file: "


def _planted_pack(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A copy of jaffle_shop whose orders' held-out (val and test) expected rows end their status in a marker.
    The customers' expected rows stay as they are, so a child can still gain on the validation keys."""
    root = tmp_path / "jaffle_shop"
    shutil.copytree(PACK, root, ignore=shutil.ignore_patterns("reference", "solution"))
    task = load_task(PACK)
    held_out = [i for split in ("val", "test") for i in task.split(split).expected if i.startswith("orders:")]
    markers = {i: leakage_probe.marker(i) for i in held_out}
    path = root / "expected" / "orders.csv"
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)
    for row in rows:
        instance = f"orders:{row['order_id']}"
        if instance in markers:
            row["status"] = f"{row['status']} {markers[instance]}"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns, lineterminator="\n")  # type: ignore[arg-type]
        writer.writeheader()
        writer.writerows(rows)
    return root, markers


class Engineer:
    """The scripted model: read, query the sources and the history, test, fix the unit the test shows, test,
    commit. It acts only on what the tools answer: the factor comes from the draft test's mismatching rows, the
    line from the candidate. It also asks the history for a held-out key (`snoop`), which must be refused."""

    def __init__(self, snoop: str) -> None:
        self.snoop = snoop
        self.requests: list[str] = []  # every request's messages, as the model received them
        self.tests: list[dict[str, Any]] = []  # the test_draft answers, parsed

    def __call__(self, conversation: list[dict[str, Any]], tools: list[str]) -> Turn:
        self.requests.append(json.dumps(conversation))
        results = [turn["content"] for turn in conversation if turn["role"] == "tool"]
        step = sum(1 for turn in conversation if turn["role"] == "assistant")
        if step == 0:
            assert {"read_candidate", "edit_candidate", "test_draft", "query", "commit"} <= set(tools)
            return Turn("Read the project.", (("read_candidate", {}),))
        if step == 1:
            sql = "SELECT min(amount), max(amount), count(*) FROM raw_payments"
            return Turn("What do the payments hold, and which keys are hard?", (
                ("query", {"sql": sql}), ("get_hard_questions", {"n": 5}),
                ("get_question_solvers", {"instance_id": self.snoop}),
            ))  # fmt: skip
        if step in (2, 4):
            return Turn("Run it on the training keys.", (("test_draft", {}),))
        if step == 3:
            self.tests.append(json.loads(results[-1]))
            return Turn("Fix the unit.", (("edit_candidate", self._unit_fix(results[0], self.tests[-1])),))
        self.tests.append(json.loads(results[-1]))
        return Turn("", (("commit", {"approach": "hillclimb", "description": "payments amounts to units"}),))

    @staticmethod
    def _unit_fix(candidate: str, answer: dict[str, Any]) -> dict[str, str]:
        """Divide the staging model's `amount` by the factor between output and expected that the draft test
        shows for `amount`, scoped to the staging model's file."""
        ratios = [
            d["amount"]["output"] / d["amount"]["expected"]
            for d in (row.get("differs", {}) for row in answer["rows"])
            if "amount" in d and d["amount"]["expected"]
        ]
        factor = round(float(np.median(ratios)))
        section = candidate.split(f"{MARKER}{STAGING}\n", 1)[1].split(MARKER, 1)[0]
        assert any(line.strip() == "amount" for line in section.splitlines())
        # `amount` ends lines of other files too: only the file scope makes the search unique
        assert candidate.count("amount\n") > section.count("amount\n") == 1
        return {"search": f"{MARKER}{STAGING}\namount\n", "replace": f"amount / {factor} as amount\n"}


@pytest.mark.slow
def test_a_scripted_agent_repairs_jaffle_shop_on_real_dbt_and_sees_no_held_out_row(tmp_path: Path) -> None:
    root, markers = _planted_pack(tmp_path)
    db = tmp_path / "runs.duckdb"
    model = Engineer(snoop=min(markers))
    limits = ProviderLimits(max_retries=1, timeout_s=60.0, backoff_s=0.05, max_backoff_s=0.1)
    with FakeEndpoint(script=model) as server:
        ai = AiConfig(endpoints={"fake": EndpointConfig("openai", server.base_url, limits=limits)})
        options = {"seed": 1, "mutator": "agent", "mutator_settings": {"model": "fake/scripted"}}
        summary = api.evolve(root, db=db, budget=1, options=options, ai=ai)
    before, after = (answer["train_score"] for answer in model.tests)
    assert after > before  # the draft test ran the edited project on real dbt
    assert model.tests[0]["targets"]["orders"]["mismatching_columns"]["amount"] > 0
    assert "amount" not in model.tests[1]["targets"]["orders"]["mismatching_columns"]
    with duckdb.connect(str(db), read_only=True) as con:
        child = con.execute(
            "SELECT program_id, valid, approach, code FROM programs WHERE iteration = 1"
        ).fetchone()
        answered = con.execute(
            "SELECT tool_name, content FROM agent_turns WHERE role = 'tool' ORDER BY turn"
        ).fetchall()
        planted = con.execute("SELECT count(*) FROM evaluations WHERE expected LIKE '%LEAK%'").fetchone()[0]
    assert child[1] and child[2] == "payments amounts to units"
    assert "amount / 100 as amount" in child[3].split(f"{MARKER}{STAGING}\n", 1)[1]
    assert [name for name, _ in answered] == [
        "read_candidate", "query", "get_hard_questions", "get_question_solvers", "test_draft", "edit_candidate",
        "test_draft", "commit",
    ]  # fmt: skip
    answers = dict(answered)
    assert json.loads(answers["query"])["rows"][0][2] > 0  # the training split's copy of the payments
    assert answers["edit_candidate"] == f"edited {STAGING}"
    assert answers["get_question_solvers"].startswith(
        f"error: get_question_solvers: no training instance {min(markers)!r}"
    )
    assert summary.champion_id == child[0] and summary.champion_val_score > summary.seed_val_score
    # leakage: the held-out markers are in the run, and in nothing the model received
    assert planted > 0
    assert leakage_probe.found(model.requests, markers) == []
    assert leakage_probe.found([*model.requests, markers[min(markers)]], markers) == [min(markers)]


# -- the workspace's file scope, without dbt -------------------------------------------------------------------
PROJECT = f"{MARKER}a.sql\nselect amount\nfrom x\n{MARKER}b.sql\nselect amount\nfrom y\n"


def test_a_search_scoped_by_a_file_line_edits_that_file_only() -> None:
    space = Workspace(PROJECT, MARKER)
    with pytest.raises(WorkspaceError, match=r"occurs 2 times in the candidate.*'-- file: PATH' line"):
        space.edit("select amount\n", "select amount / 100 as amount\n")
    assert space.edit(f"{MARKER}b.sql\nselect amount\n", "select amount / 100 as amount\n") == "edited b.sql"
    assert space.code == PROJECT.replace("amount\nfrom y", "amount / 100 as amount\nfrom y")
    # a replacement that repeats the file line keeps the file where it is
    space.edit(f"{MARKER}a.sql\nfrom x\n", f"{MARKER}a.sql\nfrom z\n")
    assert space.code.count(MARKER) == 2 and "from z\n" in space.code.split(f"{MARKER}b.sql")[0]
    assert space.edits == 2


@pytest.mark.parametrize(
    ("search", "message"),
    [
        (f"{MARKER}c.sql\nselect", r"no file c\.sql \(files: a\.sql, b\.sql\)"),
        (f"{MARKER}a.sql\nfrom y", r"does not occur in a\.sql"),
        (f"{MARKER}a.sql\n", r"names the file a\.sql but no text in it"),
        (f"{MARKER}a.sql\nselect amount\nfrom x\n{MARKER}b.sql", r"does not occur in a\.sql"),
    ],
)
def test_a_scoped_search_that_cannot_apply_is_one_line_and_changes_nothing(search: str, message: str) -> None:
    space = Workspace(PROJECT, MARKER)
    with pytest.raises(WorkspaceError, match=message):
        space.edit(search, "x")
    assert space.code == PROJECT and space.edits == 0


def test_without_a_file_marker_a_marker_line_is_plain_text() -> None:
    space = Workspace(PROJECT)
    with pytest.raises(WorkspaceError, match="does not occur"):
        space.edit(f"{MARKER}b.sql\nfrom y\n", "")
    assert space.edit(f"{MARKER}b.sql\nselect", f"{MARKER}b.sql\nSELECT") == "edited the candidate"


# -- what the agent is told and shown, without running dbt -------------------------------------------------------
def test_the_prompt_gives_the_layout_sources_targets_and_the_file_scope() -> None:
    task = load_task(PACK)
    text = kind("dbt").program_prompt(task)
    for path in DbtProject.from_text(task.seed_program).files:
        assert f"- {path}: " in text
    assert (
        "- models/customers.sql: model customers (a target), reads stg_customers, stg_orders, stg_payments"
        in text
    )
    assert "- jaffle_shop.raw_payments (query: raw_payments): id INTEGER, order_id INTEGER" in text
    assert "- orders: key order_id; customer_id, order_date, status, credit_card_amount (±0.005)" in text
    assert f"start `edit_candidate`'s `search` with that file's '{MARKER}PATH' line" in text


def _rows(
    task: Any, changes: dict[str, dict[str, Any] | None], close: str, failing_test: str
) -> list[EvaluationRow]:
    """The training rows of a draft whose outputs are the expected rows but for `changes` (id -> columns to
    change, None: no row; `close`'s change stays within the tolerance), and whose data tests pass but one."""
    rows = []
    for instance, expected in task.split("train").expected.items():
        if instance.startswith("test:"):
            status = "fail" if instance == failing_test else "pass"
            rows.append(
                EvaluationRow(
                    instance,
                    float(status == "pass"),
                    json.dumps(json.dumps(status)),
                    json.dumps(expected),
                    None,
                )
            )
        elif changes.get(instance, {}) is None:
            rows.append(EvaluationRow(instance, 0.0, None, json.dumps(expected), "no output row for this id"))
        else:
            output = json.dumps({**json.loads(expected), **changes.get(instance, {})})
            score = float(instance not in changes or instance == close)
            rows.append(EvaluationRow(instance, score, json.dumps(output), json.dumps(expected), None))
    return rows


def test_a_draft_answer_names_target_key_and_column_from_training_rows_only() -> None:
    task = load_task(PACK)
    train = task.split("train").expected
    customers = sorted(i for i in train if i.startswith("customers:"))
    orders = sorted(i for i in train if i.startswith("orders:"))
    clv = {i: json.loads(train[i])["customer_lifetime_value"] for i in customers[:6]}
    changes: dict[str, dict[str, Any] | None] = {
        **{i: {"customer_lifetime_value": v * 100} for i, v in clv.items() if v},
        customers[6]: {
            "customer_lifetime_value": json.loads(train[customers[6]])["customer_lifetime_value"] + 0.004
        },  # within the tolerance
        customers[7]: None,
        **{i: {"status": "completed"} for i in orders[:3] if json.loads(train[i])["status"] != "completed"},
    }
    failing = next(i for i in train if i.startswith("test:"))
    rows = _rows(task, changes, customers[6], failing)
    answer = kind("dbt").draft_view(task, rows, 4, None)
    scaled = sum(1 for v in clv.values() if v)
    assert answer["targets"]["customers"]["mismatching_columns"] == {"customer_lifetime_value": scaled}
    assert answer["targets"]["customers"]["without_row"] == 1
    assert answer["targets"]["customers"]["matching"] == len(customers) - scaled - 1
    assert any("about 100" in p for p in answer["targets"]["customers"]["patterns"])
    assert any(p.startswith("status: 'completed' where") for p in answer["targets"]["orders"]["patterns"])
    assert answer["data_tests"] == {"passing": len(task.kind_data.tests) - 1, "failing": [failing]}
    # one row of each kind of failure before a second of any, the largest kind first
    kinds = [(r.get("target"), tuple(r.get("differs", {})), "no_row" in r) for r in answer["rows"]]
    assert len(answer["rows"]) == 4 and len(set(kinds)) == 4
    assert kinds[0] == ("customers", ("customer_lifetime_value",), False)
    first = answer["rows"][0]
    assert (
        first["differs"]["customer_lifetime_value"]["output"]
        == 100 * first["differs"]["customer_lifetime_value"]["expected"]
    )
    # exactly the rows asked for, a matching one included
    asked = [r for r in rows if r.instance_id in (customers[6], customers[7])]
    shown = kind("dbt").draft_view(task, rows, 10, asked)["rows"]
    assert shown == [
        {"id": customers[6], "target": "customers", "key": customers[6].split(":")[1], "matches": True},
        {
            "id": customers[7],
            "target": "customers",
            "key": customers[7].split(":")[1],
            "no_row": "no output row for this id",
        },
    ]
