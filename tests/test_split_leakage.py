"""No other split's data in anything the mutator can read, for the SQL, Python and dbt kinds (issue 37; the
agent-spec kind: tests/test_agent_spec_evolve.py's leakage probe, which runs `leakage_probe.mutator_view` too).

Each case copies a pack, plants a marker in every validation and test row (an input a program can read, and
for SQL and dbt the expected value too), and evolves it with a mutator that proposes a hostile child: one that
fails on the held-out rows with a runtime error quoting their input (a cast of the planted text; a Python
exception holding a distance). Everything the mutator reads is collected: the context bundle it is handed (ledger,
elites, targets, the target's observation, donors, tried approaches, the root), the live tools over its parent
and its hostile child (check, show-draft, query), every history tool over the finished run (`mutator_view`:
programs with their errors and approaches, lineage, ledger, events and transcripts, row traces, per-instance
tools), and the progress lines. No marker may appear in any of it, while the store does hold the child's raw
validation error with a marker in it (the probe looks where a leak would come from).
"""

from __future__ import annotations

import csv
import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pytest

from coco_sql import api
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import CocoError
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.tasks import TaskPack, load_task
from tests import leakage_probe

REPO = Path(__file__).resolve().parents[1]
HELD_OUT = ("val", "test")


@dataclass(frozen=True)
class Case:
    pack: str
    plant: Callable[[Path, TaskPack], list[str]]  # writes the markers into the copy; returns them
    hostile: str  # a child that fails on held-out rows quoting them
    query: str | None  # a live query the mutator may run over its training rows


def _rewrite(path: Path, change: Callable[[dict[str, str]], None], keep: int | None = None) -> None:
    """Apply `change` to every row of a CSV file (after keeping its first `keep` rows)."""
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)[:keep]
    for row in rows:
        change(row)
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, columns)  # type: ignore[arg-type]
        writer.writeheader()
        writer.writerows(rows)


def _held_out_ids(task: TaskPack) -> set[str]:
    return {str(i) for split in HELD_OUT for i in task.split(split).expected}


def plant_questions(root: Path, task: TaskPack) -> list[str]:
    """hotpotqa_type, cut to 60 + 20 questions (its AI calls are the run's time): each held-out question starts
    with its marker, and its label ends with one."""
    for name, keep in (("pool.csv", 60), ("test.csv", 20)):
        _rewrite(root / "data" / name, lambda row: None, keep)
    task = load_task(root)
    hidden = _held_out_ids(task)
    markers: list[str] = []

    def change(row: dict[str, str]) -> None:
        if row["id"] in hidden:
            marker = leakage_probe.marker(row["id"])
            row["question"] = f"{marker} {row['question']}"
            row["label"] = f"{row['label']} {marker}"
            markers.append(marker)

    for name in ("pool.csv", "test.csv"):
        _rewrite(root / "data" / name, change)
    return markers


DISTANCE_MARKER = "98765432"  # a held-out instance's second node is 987,654,321,000 away


def plant_coordinates(root: Path, task: TaskPack) -> list[str]:
    """tsp_construct: each held-out instance's second node far away, so its distances spell the marker."""
    hidden = _held_out_ids(task)

    def change(row: dict[str, str]) -> None:
        if row["id"] in hidden:
            xs = json.loads(row["x"])
            xs[1] = 987654321000.0
            row["x"] = json.dumps(xs)

    for name in ("pool.csv", "test.csv"):
        _rewrite(root / "data" / name, change)
    return [DISTANCE_MARKER]


def plant_customers(root: Path, task: TaskPack) -> list[str]:
    """jaffle_shop: each held-out customer's first name is its marker, in the source and the expected rows."""
    sources = task.kind_data.sources  # type: ignore[union-attr]
    hidden = {str(i) for split in HELD_OUT for i in sources[split]["jaffle_shop.raw_customers"]["id"]}
    markers = {i: leakage_probe.marker(f"customer {i}") for i in hidden}

    def source(row: dict[str, str]) -> None:
        row["first_name"] = markers.get(row["id"], row["first_name"])

    def expected(row: dict[str, str]) -> None:
        row["first_name"] = markers.get(row["customer_id"], row["first_name"])

    _rewrite(root / "data" / "raw_customers.csv", source)
    _rewrite(root / "expected" / "customers.csv", expected)
    return sorted(markers.values())


TSP_HOSTILE = """def select_next_node(current_node, destination_node, unvisited_nodes, distance_matrix):
    far = float(distance_matrix[0][1])
    if far > 1000:
        raise ValueError("node 1 is " + str(int(far) // 1000) + " thousand away")
    return int(unvisited_nodes[0])
"""


def jaffle_hostile() -> str:
    seed = (REPO / "tasks" / "jaffle_shop" / "seed" / "models" / "staging" / "stg_customers.sql").read_text()
    project = load_task(REPO / "tasks" / "jaffle_shop").seed_program
    return project.replace(seed.rstrip("\n"), "select id as customer_id, cast(first_name as integer) as first_name,"
                           " last_name from {{ source('jaffle_shop', 'raw_customers') }}")  # fmt: skip


SQL_HOSTILE = "SELECT id, CAST(question AS INTEGER) AS label FROM input"
CASES = {
    "sql": Case("hotpotqa_type", plant_questions, SQL_HOSTILE, "SELECT * FROM input"),
    "python": Case("tsp_construct", plant_coordinates, TSP_HOSTILE, "SELECT * FROM input"),
    "dbt": Case("jaffle_shop", plant_customers, "", None),
}


class Watching:
    """A mutator that reads everything a mutator is handed and proposes the hostile child each time."""

    name = "watching"

    def __init__(self, hostile: str, query: str | None) -> None:
        self.hostile = hostile
        self.query = query
        self.seen: list[str] = []

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        env = request.env
        self.seen += [json.dumps(asdict(request.context), default=str), request.parent.code]
        for tool in (
            lambda: env.check(self.hostile),
            lambda: env.show_draft(self.hostile, limit=1000),
            lambda: env.show_draft(request.parent.code, limit=1000),
            lambda: env.query(self.query, limit=100_000) if self.query else None,
        ):
            try:
                self.seen.append(json.dumps(tool(), default=str))
            except CocoError as refusal:
                self.seen.append(str(refusal))
        return Proposal(code=self.hostile, approach="cast what the rows hold")


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_planted_marker_in_held_out_rows_reaches_nothing_the_mutator_reads(
    tmp_path: Path, kind: str
) -> None:
    case = CASES[kind]
    root = tmp_path / case.pack
    shutil.copytree(REPO / "tasks" / case.pack, root)
    markers = case.plant(root, load_task(root))
    task = load_task(root)
    hostile = case.hostile or jaffle_hostile()
    mutator = Watching(hostile, case.query)
    lines: list[str] = []
    db = tmp_path / "runs.duckdb"
    summary = api.evolve(task, db=db, budget=1, options={"seed": 1}, mutator=mutator,
                         progress=lambda report: lines.append(report.line()))  # fmt: skip
    with DuckDBStore(db, read_only=True) as store:
        shown = [*mutator.seen, *lines, *leakage_probe.mutator_view(store, summary.run_id)]
        # the probe looks where a leak would come from: the hostile child's validation error quotes a marker
        con = store._con
        program_errors = [
            r[0] for r in con.execute("SELECT error FROM programs WHERE error IS NOT NULL").fetchall()
        ]
        raw = program_errors + [r[0] for r in con.execute(
            "SELECT error FROM evaluations WHERE split = 'val' AND error IS NOT NULL").fetchall()]  # fmt: skip
    assert any(marker in error for error in raw for marker in markers), raw[:3]
    leaked = [m for m in markers if any(m in text for text in shown)]
    assert leaked == [], [text for text in shown if leaked[0] in text][:1]
    if program_errors:  # what the mutator sees instead of the message (dbt's failures are its rows' own)
        assert any("fails on validation: runtime error" in text for text in shown)
