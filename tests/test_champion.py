"""The champion rule (`engine.champion`, issue 26): a table of programs and the champion each rule picks, and the
rule as the loop, `status`, exports, the `coco_evolve` row and the report apply it to real runs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pack_copies import small_pack

import coco_sql
from coco_sql import api
from coco_sql.engine.champion import Candidate, champion_of, choose, standard_error
from coco_sql.engine.deploy_cost import CALLS, TOKENS
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import ConfigError
from coco_sql.report import read_models
from coco_sql.tasks import load_task
from tests.conftest import run_cli
from tests.test_proxy import SEED, Cheaper, cheaper_child

# The case of issue 26: on 396 validation rows, the all-examples program scores 366/396 = 0.9242 at 21.8M tokens
# per 1,000 rows; the proxy scores one row lower, 365/396 = 0.9217, at 1/134 of that cost.
N = 396
ALL_EXAMPLES = Candidate("1-7", 7, 366 / N, 21_800_000.0)
PROXY = Candidate("1-5", 5, 365 / N, 21_800_000.0 / 134)
ROWS = {"1-7": [1.0] * 366 + [0.0] * 30}


def rows_of(program_id: str) -> list[float]:
    return ROWS[program_id]


def test_standard_error_is_the_sample_sd_over_root_n_in_any_order() -> None:
    scores = [1.0] * 366 + [0.0] * 30
    p = 366 / N
    assert standard_error(scores) == pytest.approx(math.sqrt(p * (1 - p) * N / (N - 1)) / math.sqrt(N))
    assert standard_error(scores) == standard_error(scores[::-1]) == standard_error(sorted(scores))
    assert standard_error([0.7]) == standard_error([]) == 0.0
    assert standard_error([1.0] * 50) == 0.0  # every row solved: no doubt left


# Each case: candidates (id, iteration, val score, cost), the best's per-row scores, the expected champion under
# the default rule and under 'best'.
CASES = {
    "issue 26: one row lower at 1/134 of the cost": (
        [ALL_EXAMPLES, PROXY], ROWS["1-7"], "1-5", "1-7",
    ),
    "no AI calls (all cost 0): the best, as before": (
        [Candidate("1-0", 0, 0.5, 0.0), Candidate("1-3", 3, 0.9, 0.0), Candidate("1-4", 4, 0.88, 0.0)],
        [1.0] * 9 + [0.0], "1-3", "1-3",
    ),
    "equal scores and costs: the earliest": (
        [Candidate("1-6", 6, 0.9, 100.0), Candidate("1-2", 2, 0.9, 100.0)], [1.0] * 9 + [0.0], "1-2", "1-2",
    ),
    "equal scores: the cheaper one, even if later": (
        [Candidate("1-2", 2, 0.9, 100.0), Candidate("1-6", 6, 0.9, 99.0)], [1.0] * 9 + [0.0], "1-6", "1-2",
    ),
    "a cheaper program just outside one SE is not champion": (
        # best 0.8 over 4 rows (1, 1, 1, 0.2): sd = 0.4, SE = 0.2; 0.59 < 0.8 - 0.2
        [Candidate("1-1", 1, 0.8, 10.0), Candidate("1-2", 2, 0.59, 1.0)], [1.0, 1.0, 1.0, 0.2], "1-1", "1-1",
    ),
    "a cheaper program just inside one SE is": (
        [Candidate("1-1", 1, 0.8, 10.0), Candidate("1-2", 2, 0.61, 1.0)], [1.0, 1.0, 1.0, 0.2], "1-2", "1-1",
    ),
    "costs tied within the SE: the higher score, then the earlier": (
        [Candidate("1-1", 1, 0.8, 10.0), Candidate("1-2", 2, 0.7, 5.0), Candidate("1-3", 3, 0.75, 5.0),
         Candidate("1-4", 4, 0.75, 5.0)],
        [1.0, 1.0, 1.0, 0.2], "1-3", "1-1",
    ),
    "costs that differ in the 12th digit are equal": (
        [Candidate("1-1", 1, 0.8, 1000.0), Candidate("1-2", 2, 0.75, 1000.0 - 1e-10)],
        [1.0, 1.0, 1.0, 0.2], "1-1", "1-1",
    ),
    "every row solved (SE 0): only programs as good as the best": (
        [Candidate("1-1", 1, 1.0, 10.0), Candidate("1-2", 2, 0.98, 1.0), Candidate("1-3", 3, 1.0, 4.0)],
        [1.0] * 50, "1-3", "1-1",
    ),
    "one validation row (SE 0)": (
        [Candidate("1-1", 1, 1.0, 10.0), Candidate("1-2", 2, 0.0, 1.0)], [1.0], "1-1", "1-1",
    ),
    "an unpriced program (infinite cost) is never the cheaper": (
        [Candidate("1-1", 1, 0.8, math.inf), Candidate("1-2", 2, 0.78, 3.0)], [1.0, 1.0, 1.0, 0.2], "1-2", "1-1",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", CASES)
def test_the_rule_on_a_table_of_programs(case: str) -> None:
    candidates, best_rows, champion, best = CASES[case]
    default = choose(candidates, lambda pid: best_rows)
    assert default is not None and default.champion.program_id == champion
    assert default.best.program_id == best and default.standard_error == standard_error(best_rows)
    unconstrained = choose(candidates, lambda pid: best_rows, "best")
    assert (
        unconstrained is not None
        and unconstrained.champion.program_id == unconstrained.best.program_id == best
    )
    shuffled = choose(candidates[::-1], lambda pid: best_rows)  # the order programs come in changes nothing
    assert shuffled is not None and shuffled.champion == default.champion


def test_the_issue_26_case_says_what_it_chose() -> None:
    choice = choose([ALL_EXAMPLES, PROXY], rows_of, measure=TOKENS)
    assert choice is not None and choice.differs
    assert choice.describe() == (
        "champion 1-5: the cheapest program to deploy whose validation score is within one standard error of the "
        "best's (0.9242 - 0.0133 = 0.9109); the best, 1-7, scores 0.9242 at 21,800,000 tokens per 1,000 rows, "
        "the champion 0.9217 at 162,687 tokens (0.7% of it)"
    )
    assert json.loads(json.dumps(choice.as_dict()))["champion"]["program_id"] == "1-5"


def test_no_candidate_is_none_and_an_unknown_rule_is_one_line() -> None:
    assert choose([], rows_of) is None
    with pytest.raises(ConfigError) as caught:
        choose([PROXY], rows_of, "cheapest")
    assert str(caught.value) == "the champion rule is one of cheapest_within_se, best (got 'cheapest')"
    with pytest.raises(ConfigError, match="option 'champion' must be one of cheapest_within_se, best"):
        api.evolve("lockpicking6", db=":memory:", budget=0, options={"champion": "cheapest"})


# -- real runs ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cheaper_twin(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A hotpotqa_type copy whose seed has 20 inline examples, and a store with two runs of it: the default rule
    (run 1) and --champion best (run 2), each with one child as good as the seed on every row at a lower cost
    (`test_proxy.cheaper_child`, proposed by a mutator written for the test)."""
    root = small_pack(tmp_path_factory.mktemp("packs"), "hotpotqa_type", pool_rows=90)
    child = cheaper_child(load_task(root))
    (root / "seed.sql").write_text(SEED, encoding="utf-8")
    db = root.parent / "runs.duckdb"
    for rule in ("cheapest_within_se", "best"):
        api.evolve(root, db=db, budget=1, options={"seed": 1, "champion": rule}, mutator=Cheaper(child))
    return root, db


def test_a_cheaper_program_as_good_is_the_champion_and_the_best_is_one_flag_away(
    cheaper_twin: tuple[Path, Path],
) -> None:
    _, db = cheaper_twin
    with DuckDBStore(db, read_only=True) as store:
        costs = {p["program_id"]: p["deploy_cost"].tokens for p in read_models.program_costs(store, 1)}
        scores = {pid: s.score for pid, s in store.program_scores(1, "val").items()}
        default, best = champion_of(store, 1), champion_of(store, 2)
        status = {row["run_id"]: row for row in read_models.status(store)}
        summary_row = store.events(1, "run_finished")[0]
    assert scores["1-0"] == scores["1-1"] and costs["1-1"] < costs["1-0"]  # as good, cheaper
    assert default is not None and default.rule == "cheapest_within_se" and default.measure == TOKENS
    assert (default.champion.program_id, default.best.program_id) == ("1-1", "1-0")
    assert (
        best is not None and best.rule == "best" and best.champion.program_id == best.best.program_id == "2-0"
    )
    # the loop, the finish event, status and the export name the same program
    assert (
        summary_row.program_id == "1-1"
        and status[1]["champion_id"] == "1-1"
        and status[1]["best_id"] == "1-0"
    )
    assert status[2]["champion_id"] == status[2]["best_id"] == "2-0"
    assert api.export(1, db=db).program_id == "1-1"
    assert api.export(1, db=db, champion="best").program_id == "1-0"  # one flag away
    assert api.export(2, db=db, champion="cheapest_within_se").program_id == "2-1"
    # the cheaper twin is warned about only where the rule let the dearer program win
    assert api.champion_warnings(1, db=db) == []
    (warning,) = api.champion_warnings(2, db=db)
    assert warning.startswith("program 2-1 scores as well as champion 2-0")
    # the report states the rule and shows both programs
    page = api.report(1, db=db).html
    assert (
        "The champion</b> is the cheapest program to deploy whose validation score is within one standard"
        in page
    )
    assert "the best validation score is 1-0's" in page and "--champion best" in page


def test_the_cli_and_the_coco_evolve_row_show_the_champion_and_the_best(
    cheaper_twin: tuple[Path, Path], tmp_path: Path
) -> None:
    root, db = cheaper_twin
    done = run_cli("status", "--db", db, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "champion" in lines[0]
    assert "1-1 " in lines[1] and "(best: 1-0; the champion is cheaper, within one SE)" in lines[1]
    assert "2-0 " in lines[2] and "best:" not in lines[2]
    exported = run_cli("export", "--db", db, "--run", "1", "--champion", "best", cwd=tmp_path)
    assert exported.returncode == 0 and exported.stdout.startswith("-- coco-sql best program 1-0 of run 1")
    con = coco_sql.connect(tmp_path / "sql.duckdb")
    try:
        row = con.execute(
            f"CALL coco_evolve('{root}', 0, {{'seed': 1}})"  # budget 0: the seed is champion and best
        ).fetchone()
        names = [c[0] for c in con.description]
    finally:
        con.close()
    summary = dict(zip(names, row, strict=True))
    assert summary["champion_id"] == summary["best_id"] == "1-0"
    assert summary["best_val_score"] == summary["champion_val_score"]


def test_a_task_without_ai_keeps_its_champion_under_either_rule(tmp_path: Path) -> None:
    db = tmp_path / "lp.duckdb"
    summary = api.evolve(
        "lockpicking6", db=db, budget=4, options={"seed": 1, "mutator_settings": {"max_drafts": 6}}
    )
    with DuckDBStore(db, read_only=True) as store:
        costs = {p["program_id"]: p["deploy_cost"].calls for p in read_models.program_costs(store, 1)}
        default, best = champion_of(store, 1), champion_of(store, 1, "best")
    assert set(costs.values()) == {0.0}  # no AI calls: every program costs 0
    assert default is not None and best is not None and default.measure == CALLS
    assert default.champion == best.champion == default.best
    assert summary.champion_id == summary.best_id == default.champion.program_id
    assert summary.champion_val_score == max(s.score for s in read_scores(db).values())


def read_scores(db: Path) -> dict:
    with DuckDBStore(db, read_only=True) as store:
        return store.program_scores(1, "val")
