"""The history query tools (CoCoEvolve Table 6) on real runs: each tool's contract, and the no-leak guarantee.

Runs are made by the real loop on real DuckDB. The no-leak test uses a partition pack whose validation and test
ids, inputs and expected values are recognisable tokens, calls every tool with every argument through the Python
API and the CLI, and asserts that none of those tokens appears in any output (a self-check proves the assertion
catches a leaky query).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest

from coco_sql.engine import EvolutionLoop, RunConfig
from coco_sql.engines.duckdb.store import DuckDBStore
from coco_sql.errors import CocoError, ConfigError
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.mutate import MutationRequest, Proposal
from coco_sql.reflect.history import HistoryTools
from coco_sql.store.history_sql import QUERIES, WITHHELD_ERROR
from coco_sql.store.records import AgentTurn
from coco_sql.tasks import load_task
from tests.conftest import REPO, run_cli

# ------------------------------------------------------------------------------------------ a lockpicking run


@pytest.fixture(scope="module")
def lp_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("history") / "lp.duckdb"
    with DuckDBStore(db) as store:
        EvolutionLoop(store, load_task("lockpicking6")).start(
            RunConfig(seed=2, budget=12, mutator_settings={"max_drafts": 8})
        )
    return db


@pytest.fixture
def lp(lp_db: Path) -> Iterator[tuple[HistoryTools, duckdb.DuckDBPyConnection]]:
    """The tools over the run, and a raw read-only connection to check them against."""
    with DuckDBStore(lp_db, read_only=True) as store:
        con = store._con  # the same file: the tests check the tools against raw SQL
        yield HistoryTools(store, 1), con


def _val_scores(con: duckdb.DuckDBPyConnection) -> dict[str, float]:
    rows = con.execute("SELECT program_id, score FROM program_scores WHERE split = 'val'").fetchall()
    return dict(rows)


def _train_ids(con: duckdb.DuckDBPyConnection) -> list[str]:
    rows = con.execute(
        "SELECT DISTINCT instance_id FROM evaluations WHERE split = 'train' ORDER BY 1"
    ).fetchall()
    return [r[0] for r in rows]


def _row_score(con: duckdb.DuckDBPyConnection, program_id: str, instance_id: str) -> float:
    (score,) = con.execute(
        "SELECT score FROM evaluations WHERE program_id = ? AND split = 'train' AND instance_id = ?",
        [program_id, instance_id],
    ).fetchone()
    return score


def test_get_program_and_parent(lp) -> None:
    tools, con = lp
    program = tools.get_program("1-5")
    code, parent, valid = con.execute(
        "SELECT code, parent_id, valid FROM programs WHERE program_id = '1-5'"
    ).fetchone()
    assert (program["code"], program["parent_id"], program["valid"], program["iteration"]) == (
        code,
        parent,
        valid,
        5,
    )
    assert {"donor_id", "island", "cell", "approach", "strategy", "error", "train_score"} <= set(program)
    assert program["val_score"] == _val_scores(con)["1-5"]

    seed = tools.get_parent("1-0")
    assert seed["parent_id"] is None and seed["parent_val_score"] is None
    children = con.execute(
        "SELECT program_id FROM programs WHERE parent_id = '1-0' ORDER BY iteration"
    ).fetchall()
    assert [c["program_id"] for c in seed["children"]] == [c[0] for c in children]
    scores = _val_scores(con)
    for child in seed["children"]:
        if child["valid"]:
            assert child["delta"] == pytest.approx(scores[child["program_id"]] - scores["1-0"])
    info = tools.get_parent("1-5")
    assert info["parent_id"] == parent and info["parent_val_score"] == scores[parent]
    assert info["delta"] == pytest.approx(scores["1-5"] - scores[parent])


def test_lineage_is_consecutive_and_ends_at_the_seed(lp) -> None:
    tools, con = lp
    for (program_id,) in con.execute("SELECT program_id FROM programs WHERE iteration > 0").fetchall():
        lineage = tools.get_lineage(program_id, depth=100)
        assert [a["depth"] for a in lineage] == list(range(1, len(lineage) + 1))
        assert lineage[-1]["program_id"] == "1-0"
        child = tools.get_program(program_id)
        for ancestor in lineage:  # each row is the parent of the one before
            assert ancestor["program_id"] == child["parent_id"]
            child = tools.get_program(ancestor["program_id"])
        assert tools.get_lineage(program_id, depth=1) == lineage[:1]
    assert tools.get_lineage("1-0") == []


def test_best_and_diverse_programs(lp) -> None:
    tools, con = lp
    scores = _val_scores(con)
    best = tools.get_best_programs(n=4)
    assert len(best) == 4
    keys = [(-b["val_score"], b["iteration"]) for b in best]
    assert keys == sorted(keys)
    assert best[0]["val_score"] == max(scores.values())

    archive = con.execute("SELECT island, cell, program_id FROM archive WHERE run_id = 1").fetchall()
    diverse = tools.get_diverse_programs()
    assert sorted(d["cell"] for d in diverse) == sorted({cell for _, cell, _ in archive})
    for entry in diverse:
        occupants = [pid for _, cell, pid in archive if cell == entry["cell"]]
        assert entry["program_id"] in occupants
        assert entry["val_score"] == max(scores[pid] for pid in occupants)
        assert entry["islands"] == sorted(i for i, cell, _ in archive if cell == entry["cell"])


def test_architecture_history_is_every_landing_in_order(lp) -> None:
    tools, con = lp
    landings = con.execute(
        "SELECT iteration, seq, cell, program_id FROM archive_entries ORDER BY iteration, seq"
    )
    expected = landings.fetchall()
    history = tools.get_architecture_history()
    assert [(h["iteration"], h["seq"], h["cell"], h["program_id"]) for h in history] == expected
    cell = expected[0][2]
    assert [h["cell"] for h in tools.get_architecture_history(cell)] == [
        e[2] for e in expected if e[2] == cell
    ]
    first = tools.get_architecture_history(cell)[0]
    assert first["reason"] == "seed" and first["replaced_id"] is None
    assert tools.get_architecture_history("no-such-cell") == []


def test_recent_scores_trace_the_best_so_far(lp) -> None:
    tools, _ = lp
    trace = tools.get_recent_scores(n=100)
    assert [t["iteration"] for t in trace] == list(range(13))
    best = -1.0
    for row in trace:
        if row["val_score"] is not None:
            best = max(best, row["val_score"])
        assert row["best_so_far"] == best
    assert tools.get_recent_scores(n=3) == trace[-3:]


def test_thinking_trace_is_the_iterations_events(lp) -> None:
    tools, con = lp
    trace = tools.get_thinking_trace(3)
    assert trace["iteration"] == 3 and trace["transcript"] == []  # the offline mutator talks to no model
    events = trace["events"]
    stored = con.execute("SELECT kind, program_id, payload FROM events WHERE iteration = 3 ORDER BY rowid")
    assert [(e["kind"], e["program_id"], e["payload"]) for e in events] == [
        (kind, pid, json.loads(payload)) for kind, pid, payload in stored.fetchall()
    ]
    assert events[0]["kind"] == "parent_selected" and "mutation" in [e["kind"] for e in events]
    assert all(e["iteration"] == 3 and isinstance(e["payload"], dict) for e in events)
    with pytest.raises(ConfigError, match=r"no iteration 99 in run 1 \(iterations: 0\.\.12\)"):
        tools.get_thinking_trace(99)


def test_question_solvers_really_score_what_they_say(lp) -> None:
    tools, con = lp
    for instance in _train_ids(con)[:10]:
        solvers = tools.get_question_solvers(instance, n=3)
        assert len(solvers) == 3
        assert [s["score"] for s in solvers] == sorted((s["score"] for s in solvers), reverse=True)
        (top,) = con.execute(
            "SELECT MAX(score) FROM evaluations WHERE split = 'train' AND instance_id = ?", [instance]
        ).fetchone()
        assert solvers[0]["score"] == top
        for solver in solvers:
            assert _row_score(con, solver["program_id"], instance) >= solver["score"]
            if solver["parent_id"] is not None:
                assert solver["parent_score"] == _row_score(con, solver["parent_id"], instance)


def test_question_memory_rows_are_real_regressions(lp) -> None:
    tools, con = lp
    found = 0
    for instance in _train_ids(con):
        for row in tools.get_question_memory(instance):
            found += 1
            assert row["child_score"] < row["parent_score"] and row["delta"] < 0
            assert _row_score(con, row["child_id"], instance) == row["child_score"]
            assert _row_score(con, row["parent_id"], instance) == row["parent_score"]
            assert tools.get_program(row["child_id"])["parent_id"] == row["parent_id"]
    (expected,) = con.execute(
        "SELECT COUNT(*) FROM evaluations c JOIN programs p USING (program_id) "
        "JOIN evaluations e ON e.program_id = p.parent_id AND e.split = 'train' AND e.instance_id = c.instance_id "
        "WHERE c.split = 'train' AND c.score < e.score"
    ).fetchone()
    assert found == expected


def test_suggested_and_hard_questions(lp) -> None:
    tools, con = lp
    suggested = tools.get_suggested_questions("1-4", n=5)
    assert len(suggested) == 5
    worst = con.execute(
        "SELECT MIN(score) FROM evaluations WHERE program_id = '1-4' AND split = 'train'"
    ).fetchone()[0]
    assert suggested[0]["score"] == worst
    assert [s["score"] for s in suggested] == sorted(s["score"] for s in suggested)
    for row in suggested:
        output, expected = con.execute(
            "SELECT output, expected FROM evaluations WHERE program_id = '1-4' AND split = 'train' "
            "AND instance_id = ?",
            [row["instance_id"]],
        ).fetchone()
        assert (row["output"], row["expected"]) == (output, expected)

    hard = tools.get_hard_questions(n=50)
    bests = [h["population_best"] for h in hard]
    assert bests == sorted(bests)
    for row in hard[:5]:
        (best,) = con.execute(
            "SELECT MAX(score) FROM evaluations WHERE split = 'train' AND instance_id = ?",
            [row["instance_id"]],
        ).fetchone()
        assert row["population_best"] == best


def test_errors_are_one_line_config_errors(lp) -> None:
    tools, _ = lp
    with pytest.raises(ConfigError, match=r"^no program 'nope' in run 1$"):
        tools.get_program("nope")
    with pytest.raises(ConfigError, match=r"^no training instance 'nope' in run 1$"):
        tools.get_question_solvers("nope")
    with pytest.raises(ConfigError, match=r"unknown history tool 'get_everything' \(known: get_program, "):
        tools.call("get_everything")
    with pytest.raises(ConfigError, match=r"get_program needs program_id \(--program\)"):
        tools.call("get_program")
    with pytest.raises(ConfigError, match=r"n must be a positive integer"):
        tools.get_best_programs(n=0)
    assert tools.call("get_best_programs", n=2) == tools.get_best_programs(2)


def test_cli_prints_the_tools_json_and_errors_in_one_line(lp_db: Path, tmp_path: Path) -> None:
    done = run_cli("history", "get_lineage", "--db", lp_db, "--program", "1-6", "--depth", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with DuckDBStore(lp_db, read_only=True) as store:
        assert json.loads(done.stdout) == HistoryTools(store, 1).get_lineage("1-6", depth=2)
    for args, message in (
        (("get_program", "--program", "9-9"), "no program '9-9' in run 1"),
        (("get_question_memory", "--instance", "zz"), "no training instance 'zz' in run 1"),
        (
            ("get_hard_questions", "--program", "1-1"),
            "get_hard_questions does not take program_id (--program)",
        ),
        (("get_best_programs", "--run", "5"), "no run 5"),
    ):
        done = run_cli("history", *args, "--db", lp_db, cwd=tmp_path)
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("coco-sql: error: "), done.stderr
        assert message in done.stderr


def test_an_integer_past_what_sql_takes_is_one_line_from_the_tools_and_the_cli(
    lp, lp_db: Path, tmp_path: Path
) -> None:
    """`n` and `depth` become SQL parameters: a value past BIGINT (2**70) raised a ConversionException with a
    traceback, from the agent's tool call and from `coco-sql history -n`; now it is refused in one line."""
    tools, _ = lp
    huge = 2**70
    for tool, arguments in (
        ("get_hard_questions", {"n": huge}),
        ("get_best_programs", {"n": huge}),
        ("get_lineage", {"program_id": "1-6", "depth": huge}),
    ):
        name = "depth" if "depth" in arguments else "n"
        with pytest.raises(
            ConfigError, match=rf"^{name} must be a positive integer up to 100,000 \(got {huge}\)$"
        ):
            tools.call(tool, **arguments)
    assert len(tools.get_hard_questions(n=100_000)) == len(
        tools.get_hard_questions(n=1_000)
    )  # the bound fits
    for args, message in (
        (("get_hard_questions", "-n", str(huge)), f"n must be a positive integer up to 100,000 (got {huge})"),
        (("get_best_programs", "--run", str(huge)), f"no run {huge}"),
        (("get_thinking_trace", "--iteration", str(huge)), f"no iteration {huge} in run 1"),
    ):
        done = run_cli("history", *args, "--db", lp_db, cwd=tmp_path)
        assert done.returncode == 2 and done.stdout == "", done.stderr
        assert done.stderr.count("\n") == 1 and done.stderr.startswith("coco-sql: error: "), done.stderr
        assert message in done.stderr


# ------------------------------------------------------------------------------------------ the no-leak test


def _write_pack(root: Path, ids: list[str], words: list[str]) -> None:
    """A partition pack: n is a recognisable 9-digit number, w a word carrying the id, label = ±n (n % 3)."""
    (root / "data").mkdir(parents=True, exist_ok=True)
    lines = []
    for k, (instance, word) in enumerate(zip(ids, words, strict=True)):
        n = 913_000_000 + 1013 * k
        lines.append(f"{instance},{n},{word},{n if n % 3 == 0 else -n}")
    (root / "data" / "pool.csv").write_text("id,n,w,label\n" + "\n".join(lines) + "\n")
    (root / "seed.sql").write_text("SELECT id, 0 AS label FROM input\n")
    (root / "task.toml").write_text(
        'name = "thirds"\ndescription = "multiples of three"\ndialect = "duckdb"\n'
        '[data]\npool = "data/pool.csv"\nid_column = "id"\nexpected_column = "label"\n'
        '[data.input_columns]\nn = "INTEGER"\nw = "VARCHAR"\n'
        '[splits]\nseed = 7\nmode = "partition"\ntrain_fraction = 0.3\ntest_fraction = 0.3\n'
        '[contract]\noutput = "label"\ntype = "INTEGER"\n[scorer]\nkind = "exact"\n'
        '[program]\nseed = "seed.sql"\n'
    )


def _tagged_pack(tmp_path: Path) -> tuple[Path, dict[str, set[str]]]:
    """The pack with its split written into every id and word ('i017VALQ', 'w017TESTQ'). Ids are numbered
    first, so tagging keeps their sorted order and the seeded partition assigns the same rows."""
    size = 90
    plain = [f"i{k:03d}" for k in range(size)]
    _write_pack(tmp_path / "plain" / "thirds", plain, plain)
    task = load_task(tmp_path / "plain" / "thirds")
    split_of = {i: name for name in ("train", "val", "test") for i in task.split(name).expected}
    tag = {"train": "tr", "val": "VALQ", "test": "TESTQ"}
    ids = [f"{i}{tag[split_of[i]]}" for i in plain]
    words = [f"w{i[1:]}{tag[split_of[i]]}" for i in plain]
    root = tmp_path / "tagged" / "thirds"
    _write_pack(root, ids, words)
    task = load_task(root)
    splits = {name: set(task.split(name).expected) for name in ("train", "val", "test")}
    assert all(i.endswith(tag[name]) for name, members in splits.items() for i in members)
    return root, splits


class _FailsOnHiddenRows:
    """The offline mutator, except at iteration 1 (the seed's first child: a seed the offline mutator has nothing
    left for would end the run before a later one), where it proposes a child that answers every training row
    and fails on any other row with a runtime error quoting that row's input (a validation row's word). Its
    transcript there is what a chat model would have seen: a query tool's answer over the environment's rows."""

    name = "offline+failing"

    def __init__(self, train_ids: set[str]) -> None:
        self._inner = OfflineMutator(max_drafts=6)
        self._train = sorted(train_ids)

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        if request.iteration != 1:
            return self._inner.propose(request, rng)
        listed = ", ".join(f"'{i}'" for i in self._train)
        code = f"SELECT id, CASE WHEN id IN ({listed}) THEN 0 ELSE CAST(w AS INTEGER) END AS label FROM input"
        call = {"id": "c1", "name": "query", "arguments": {"sql": "SELECT * FROM input"}}
        seen = json.dumps(request.env.query("SELECT * FROM input", limit=1000))
        transcript = (
            AgentTurn("agent", 0, "user", "Which rows are there?", template="agent_task@1"),
            AgentTurn("agent", 1, "assistant", "", (call,), input_tokens=20, output_tokens=5, model="m"),
            AgentTurn("agent", 2, "tool", seen, tool_call_id="c1", tool_name="query"),
        )
        return Proposal(code=code, approach="cast the word of unlisted rows", transcript=transcript)


def _forbidden_tokens(root: Path, splits: dict[str, set[str]]) -> list[str]:
    """Every id, input value and expected value of a validation or test row, as text."""
    hidden = splits["val"] | splits["test"]
    tokens = []
    for line in (root / "data" / "pool.csv").read_text().splitlines()[1:]:
        instance, n, word, label = line.split(",")
        if instance in hidden:
            tokens += [instance, n, word, label]
    return tokens


def _leaks(text: str, tokens: list[str]) -> list[str]:
    return [token for token in tokens if token in text] + re.findall(r"\w*(?:VALQ|TESTQ)\w*", text)


def _every_call(
    tools: HistoryTools, con: duckdb.DuckDBPyConnection, probes: list[str]
) -> list[tuple[str, dict]]:
    """Every tool with every program id, iteration, cell and instance id (training ids and `probes`)."""
    programs = [r[0] for r in con.execute("SELECT program_id FROM programs ORDER BY iteration").fetchall()]
    (last,) = con.execute("SELECT MAX(iteration) FROM programs").fetchone()
    cells = [r[0] for r in con.execute("SELECT DISTINCT cell FROM archive_entries").fetchall()]
    instances = _train_ids(con) + probes
    calls: list[tuple[str, dict]] = [
        ("get_best_programs", {"n": 1000}),
        ("get_diverse_programs", {}),
        ("get_architecture_history", {}),
        ("get_recent_scores", {"n": 1000}),
        ("get_hard_questions", {"n": 1000}),
        ("get_primitives", {"n": 1000}),
    ]
    for pid in programs:
        calls += [
            ("get_program", {"program_id": pid}),
            ("get_parent", {"program_id": pid}),
            ("get_lineage", {"program_id": pid, "depth": 1000}),
            ("get_suggested_questions", {"program_id": pid, "n": 1000}),
        ]
    calls += [("get_thinking_trace", {"iteration": i}) for i in range(last + 1)]
    calls += [("get_architecture_history", {"cell": c}) for c in cells]
    for instance in instances:
        calls += [
            ("get_question_solvers", {"instance_id": instance, "n": 1000}),
            ("get_question_memory", {"instance_id": instance, "n": 1000}),
        ]
    assert {tool for tool, _ in calls} == set(HistoryTools.TOOLS)
    return calls


def test_no_tool_ever_returns_a_validation_or_test_row(tmp_path: Path) -> None:
    root, splits = _tagged_pack(tmp_path)
    task = load_task(root)
    db = tmp_path / "leak.duckdb"
    with DuckDBStore(db) as store:
        EvolutionLoop(store, task, mutator=_FailsOnHiddenRows(splits["train"])).start(
            RunConfig(seed=0, budget=5, mutator_settings={"max_drafts": 6})
        )
    tokens = _forbidden_tokens(root, splits)
    hidden = sorted(splits["val"] | splits["test"])
    probes = [*hidden, "i999tr", "nope"]

    with DuckDBStore(db, read_only=True) as store:
        con = store._con
        # The store really holds the hidden rows, and the failing child's stored error quotes one of them.
        assert set(hidden) <= {
            r[0] for r in con.execute("SELECT DISTINCT instance_id FROM evaluations").fetchall()
        }
        (error,) = con.execute("SELECT error FROM programs WHERE program_id = '1-1'").fetchone()
        assert _leaks(error, tokens), error
        tools = HistoryTools(store, 1)
        assert tools.get_program("1-1")["error"] == WITHHELD_ERROR
        assert tools.get_program("1-1")["valid"] is False

        outputs: list[str] = []
        errors: dict[str, str] = {}
        calls = _every_call(tools, con, probes)
        for tool, kwargs in calls:
            try:
                outputs.append(json.dumps(tools.call(tool, **kwargs)))
            except CocoError as failure:
                errors[kwargs.get("instance_id", "")] = str(failure)
                outputs.append(str(failure))
        # Hidden ids are refused exactly like an id that does not exist.
        assert set(errors) == set(probes)
        for probe in probes:
            assert errors[probe] == f"no training instance {probe!r} in run 1"
        everything = "\n".join(outputs)
        for text in outputs:
            if text.startswith("no training instance"):
                continue  # the refusal echoes the id the caller gave, and nothing else
            assert not _leaks(text, tokens), text[:300]
        assert any(i in everything for i in splits["train"])  # training rows are shown
        (tool_turn,) = [t for t in tools.get_thinking_trace(1)["transcript"] if t["role"] == "tool"]
        assert all(i in tool_turn["content"] for i in splits["train"])  # the transcript is checked, not empty

    # The same through the CLI (each call is a process, so a sample: every tool once, the failing child, the
    # iteration it was made in, and a validation and a test id).
    firsts = {tool: kwargs for tool, kwargs in reversed(calls)}
    firsts["get_question_solvers"] = {"instance_id": sorted(splits["train"])[0], "n": 1000}
    cli_calls = [
        *firsts.items(),
        ("get_program", {"program_id": "1-1"}),
        ("get_thinking_trace", {"iteration": 1}),
    ]
    cli_calls += [("get_question_solvers", {"instance_id": min(splits["val"])})]
    cli_calls += [("get_question_memory", {"instance_id": min(splits["test"])})]
    flags = {
        "program_id": "--program",
        "instance_id": "--instance",
        "iteration": "--iteration",
        "cell": "--cell",
    }
    for tool, kwargs in cli_calls:
        argv = ["history", tool, "--db", db]
        for key, value in kwargs.items():
            argv += ["-n" if key == "n" else "--depth" if key == "depth" else flags[key], str(value)]
        done = run_cli(*argv, cwd=tmp_path)
        if kwargs.get("instance_id") in probes:
            assert done.returncode == 2 and done.stdout == ""
            assert (
                done.stderr.strip()
                == f"coco-sql: error: no training instance {kwargs['instance_id']!r} in run 1"
            )
        else:
            assert done.returncode == 0, done.stderr
            assert not _leaks(done.stdout + done.stderr, tokens), (tool, kwargs)


def test_the_leak_check_catches_a_leaky_query(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Self-check: with one query widened to every split, the assertion above fails."""
    root, splits = _tagged_pack(tmp_path)
    db = tmp_path / "leak.duckdb"
    with DuckDBStore(db) as store:
        EvolutionLoop(store, load_task(root)).start(
            RunConfig(seed=0, budget=1, mutator_settings={"max_drafts": 4})
        )
    tokens = _forbidden_tokens(root, splits)
    leaky = QUERIES["suggested_questions"].replace("split = 'train' AND program_id", "program_id")
    assert leaky != QUERIES["suggested_questions"]
    monkeypatch.setitem(QUERIES, "suggested_questions", leaky)
    with DuckDBStore(db, read_only=True) as store:
        text = json.dumps(HistoryTools(store, 1).get_suggested_questions("1-0", n=1000))
    assert _leaks(text, tokens)


def test_every_query_reads_no_test_rows_and_filters_its_run() -> None:
    for name, sql in QUERIES.items():
        assert "'test'" not in sql and "test_score" not in sql, name
        assert "$run_id" in sql, name
    assert (REPO / "coco_sql" / "store" / "history_sql.py").exists()
