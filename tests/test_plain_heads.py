"""The plain heads early in every run (issue 38, `languages.sql.mutate.plain_heads`): the linear head alone and
the centroid head alone become children of the first iterations unless significantly worse on the training
rows, so that the champion rule compares richer programs with them; the same children through the CLI and
`CALL coco_evolve`. Real embedded model, real DuckDB, the repository's dialog_topics pack."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

import coco_sql
from coco_sql import api
from coco_sql.core.outcome import Outcome
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.languages.sql.mutate.plain_heads import due, pending, proposed, sign_test, significantly_worse
from coco_sql.reflect.context import ContextBundle, StrategyNote
from coco_sql.store.records import EvaluationRow

LINEAR = "plain_head: AI_CLASSIFY #1: the linear head alone answers every row (examples; k 20)"
CENTROID = "plain_head: AI_CLASSIFY #1: the centroid head alone answers every row (examples; k 20)"


def outcome(scores: list[float]) -> Outcome:
    rows = tuple(EvaluationRow(f"r{i}", s, '"a"', '"a"', None) for i, s in enumerate(scores))
    return Outcome("train", rows, sum(scores) / len(scores), None, 0.0)


def test_the_sign_test_counts_only_the_rows_where_the_two_differ() -> None:
    draft = outcome([1.0] * 90 + [0.0] * 10)
    close = outcome([1.0] * 86 + [0.0] * 4 + [1.0] * 2 + [0.0] * 8)  # draft wins 4 rows, the head 2
    assert sign_test(close, draft) == (4, 2, pytest.approx(22 / 64))
    assert not significantly_worse(close, draft)
    far = outcome([1.0] * 80 + [0.0] * 20)  # the draft wins 10 rows, the head none: p = 2^-10
    assert sign_test(far, draft)[:2] == (10, 0) and significantly_worse(far, draft)
    assert not significantly_worse(draft, draft)  # no row differs: p = 1


def test_a_plain_head_is_due_once_the_whole_run_is_in_the_ledger_and_until_proposed() -> None:
    def note(i: int, text: str) -> StrategyNote:
        return StrategyNote(i, "hillclimb", "hillclimb", "improved", 0.1, text)

    first = ContextBundle(ledger=(note(1, "linear_head: AI_CLASSIFY #1: answer every row ..."),))
    assert not due(ContextBundle(), 1)  # the first iteration is the search's own pick
    assert due(first, 2) and pending(first) == ["linear", "centroid"]
    assert not due(first, 3)  # an iteration missing from the ledger: the run is not all in view
    assert not due(ContextBundle(ledger=first.ledger, history=False), 2)  # parent-local: nothing forced
    both = ContextBundle(ledger=(*first.ledger, note(2, LINEAR), note(3, CENTROID)))
    assert proposed([n.note for n in both.ledger]) == {"linear", "centroid"} and pending(both) == []
    assert proposed(["tune_proxy: the proxy's tau_head 0.01 -> 0.005", None]) == set()


@pytest.mark.slow
def test_the_plain_heads_are_the_next_children_and_the_same_through_call_coco_evolve(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "cli.duckdb") as store:
        summary = api.evolve("dialog_topics", db=store, budget=3, options={"seed": 1})
    with duckdb.connect(str(tmp_path / "cli.duckdb"), read_only=True) as con:
        ledger = [note for (note,) in con.execute("SELECT note FROM ledger ORDER BY iteration").fetchall()]
        from_cli = con.execute("SELECT program_id, code FROM programs ORDER BY program_id").fetchall()
        val = dict(con.execute("SELECT program_id, val_score FROM leaderboard").fetchall())
    assert not ledger[0].startswith("plain_head")  # the search's own pick first
    assert proposed(ledger[1:2]) == {"linear"} and proposed(ledger[2:3]) == {"centroid"}  # the fit's order
    # the champion rule sees them: all three cost one embedding per row, so the best validation score wins
    assert summary.champion_val_score == max(val[f"1-{i}"] for i in (1, 2, 3))

    con = coco_sql.connect(str(tmp_path / "sql.duckdb"))
    con.execute("CALL coco_evolve('dialog_topics', 3, {'seed': 1})").fetchall()
    from_sql = con.execute("SELECT program_id, code FROM programs ORDER BY program_id").fetchall()
    con.close()
    assert from_sql == from_cli
