"""Scoring hypotheses and drafts inside the engine (`languages.sql.mutate.hypothesis_scoring`) gives exactly what scoring their
rows in Python gave: the same gains (bit for bit, so the same ranking), fixed and broken rows, training scores
and joint-fit effects, for every contract type and scorer it writes in SQL, and the Python path for the others.
The reference below is the mutator's row scoring as it was before it moved into the engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlglot
from sqlglot import exp

from coco_sql.evaluate import Evaluator, Outcome
from coco_sql.languages.sql.mutate import hypothesis_scoring
from coco_sql.languages.sql.mutate.edits import Edit, cases, drop_guard, duplicate_guard, swap_guard
from coco_sql.languages.sql.mutate.hypothesis_scoring import (
    DraftScorer,
    changes_from_rows,
    output_changes,
    score_hypotheses,
)
from coco_sql.languages.sql.mutate.joint_fit import additive_shape, guard_edits, strip_point_guards
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.languages.sql.mutate.scoring_sql import _same_rows
from coco_sql.languages.sql.mutate.screening import screenable, screening_sql, split_by_hypothesis
from coco_sql.reflect import DraftEnvironment
from coco_sql.tasks import TaskPack, load_task

PENALTY = 10.0


# -- the reference: Python row scoring as the mutator did it before ------------------------------------------
def _closeness(row, numeric: bool) -> float:
    if not numeric:
        return row.score
    try:
        return -abs(float(json.loads(row.output)) - float(json.loads(row.expected)))
    except (TypeError, ValueError):
        return -1e6 if row.output is None else -1e3


def _net_gain(parent: Outcome, draft: Outcome, numeric: bool) -> float:
    if not draft.ok:
        return float("-inf")
    before = {row.instance_id: _closeness(row, numeric) for row in parent.rows}
    gain = 0.0
    for row in draft.rows:
        delta = _closeness(row, numeric) - before.get(row.instance_id, 0.0)
        gain += delta if delta > 0 else PENALTY * delta
    return gain


def _reference(env: DraftEnvironment, query: exp.Select, edits: list[Edit], parent: Outcome, numeric: bool):
    rows = env.probe(screening_sql(query, edits, env.output_column)).rows
    scored = []
    for outcome in (env.score_outputs(r) for r in split_by_hypothesis(rows, len(edits))):
        deltas = [
            _closeness(row, numeric) - _closeness(p, numeric)
            for row, p in zip(outcome.rows, parent.rows, strict=True)
        ]
        scored.append(
            (_net_gain(parent, outcome, numeric), sum(d > 0 for d in deltas), sum(d < 0 for d in deltas))
        )
    return scored


class EngineOnly(DraftEnvironment):
    """Fails the test if the mutator scores rows in Python."""

    def score_outputs(self, rows):  # type: ignore[no-untyped-def]
        raise AssertionError("scored in Python")

    def test_draft(self, code: str) -> Outcome:
        raise AssertionError("tested through the evaluator")


# -- packs -------------------------------------------------------------------------------------------------
def _pack(
    tmp_path: Path, name: str, contract: str, scorer: str, labels: list[str], extra: str = ""
) -> TaskPack:
    """60 rows (n = 0..59, s = a letter) split 60/20/20, with the given label per row."""
    pack = tmp_path / name
    (pack / "data").mkdir(parents=True)
    lines = [f"r{i:02d},{i},{'xyz'[i % 3]},{label}" for i, label in enumerate(labels)]
    (pack / "data" / "pool.csv").write_text("id,n,s,label\n" + "\n".join(lines) + "\n")
    (pack / "seed.sql").write_text("SELECT id, NULL AS label FROM input\n")
    (pack / "task.toml").write_text(
        f'name = "{name}"\ndescription = "screening scores"\ndialect = "duckdb"\n'
        '[data]\npool = "data/pool.csv"\nid_column = "id"\nexpected_column = "label"\n'
        '[data.input_columns]\nn = "INTEGER"\ns = "VARCHAR"\n'
        '[splits]\nseed = 3\nmode = "partition"\ntrain_fraction = 0.6\ntest_fraction = 0.2\n'
        f'[contract]\noutput = "label"\ntype = "{contract}"\n[scorer]\nkind = "{scorer}"\n{extra}'
        '[program]\nseed = "seed.sql"\n'
    )
    return load_task(pack)


def _arm(condition: str, leaf: str) -> exp.If:
    return exp.If(
        this=sqlglot.parse_one(condition, read="duckdb"), true=sqlglot.parse_one(leaf, read="duckdb")
    )


def _append(k: int, arm: exp.If):  # type: ignore[no-untyped-def]
    def apply(query: exp.Expression) -> exp.Expression:
        child = query.copy()
        case = cases(child)[k]
        case.set("ifs", [*case.args["ifs"], arm.copy()])
        return child

    return apply


def _edits(query: exp.Select, leaves: list[str]) -> list[Edit]:
    """Appended guards on n and s with each leaf, in each CASE (several per CASE: screened as one CASE tree),
    and every drop."""
    arms = [
        (k, _arm(c, leaf))
        for k in range(len(cases(query)))
        for c in ("n = 4", "n < 10", "n > 40", "s = 'y'", "n % 7 = 0")
        for leaf in leaves
    ]
    edits = [Edit("t", f"{k}: {arm.sql()}", _append(k, arm), arm=(k, arm)) for k, arm in arms]
    return screenable(query, edits + drop_guard(query))


CASES = {
    "varchar_exact": (
        "VARCHAR",
        "exact",
        ["a" if i % 5 == 0 else "b" if i % 3 == 0 else "c" for i in range(60)],
        "SELECT id, CASE WHEN n % 5 = 0 THEN 'a' WHEN n < 30 THEN 'b' ELSE 'c' END AS label FROM input",
        ["'a'", "'b'", "NULL"],
    ),
    "boolean_exact": (
        "BOOLEAN",
        "exact",
        ["true" if i % 4 == 0 or i > 50 else "false" for i in range(60)],
        "SELECT id, CASE WHEN n % 4 = 0 THEN TRUE WHEN s = 'x' THEN TRUE ELSE FALSE END AS label FROM input",
        ["TRUE", "FALSE"],
    ),
    "double_numeric": (
        "DOUBLE",
        "numeric",
        [str(i / 4 if i % 2 else i / 3) for i in range(60)],
        "SELECT id, CASE WHEN n % 2 = 1 THEN n / 4 WHEN n > 20 THEN n / 3 ELSE 0.1e0 END AS label FROM input",
        ["0.25", "7e0", "NULL"],
    ),
    "integer_missing_and_duplicate_rows": (  # the CASE filters rows: every hypothesis has its own row set
        "INTEGER",
        "exact",
        [str(i % 4) for i in range(60)],
        "SELECT id, CASE WHEN n % 4 = 3 THEN 3 ELSE n % 4 END AS label FROM input, (VALUES (1), (2)) AS v(k) "
        "WHERE k = 1 OR n = 7 OR CASE WHEN n = 12 THEN TRUE WHEN n % 9 = 0 THEN FALSE ELSE FALSE END",
        ["2", "0"],
    ),
    "integer_with_float_leaves": (  # a DOUBLE output for an INTEGER contract: non-integral values are missing
        "INTEGER",
        "exact",
        [str(i % 3) for i in range(60)],
        "SELECT id, CASE WHEN n % 3 = 0 THEN 0 WHEN n % 3 = 1 THEN 1 ELSE 0 END AS label FROM input",
        ["2e0", "2.5e0"],
    ),
    "multilabel_f1": (  # lists cannot be screened as new arms; drops can
        "VARCHAR[]",
        "multilabel_f1",
        ["joy;Fear" if i % 3 == 0 else "" if i % 7 == 0 else " joy " for i in range(60)],
        "SELECT id, CASE WHEN n % 3 = 0 THEN ['joy', 'fear '] WHEN n % 7 = 0 THEN [] WHEN n < 30 THEN ['JOY', NULL] "
        "ELSE ['joy', 'anger', 'joy'] END AS label FROM input",
        [],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_hypothesis_scores_in_the_engine_equal_python_row_scoring(tmp_path: Path, case: str) -> None:
    contract, scorer, labels, parent_sql, leaves = CASES[case]
    task = _pack(tmp_path, case, contract, scorer, labels)
    evaluator = Evaluator(task)
    env, engine = DraftEnvironment(evaluator), EngineOnly(evaluator)
    query = sqlglot.parse_one(parent_sql, read="duckdb")
    edits = _edits(query, leaves)
    assert len(edits) >= 3
    parent = env.test_draft(parent_sql)
    numeric = contract in ("INTEGER", "DOUBLE")
    expected = _reference(env, query, edits, parent, numeric)
    scores = score_hypotheses(engine, query, edits, parent, numeric, PENALTY)
    assert scores is not None
    assert [(s.gain, s.fixed, s.broken) for s in scores] == expected
    assert any(gain != 0 for gain, _, _ in expected)
    # and the screening query gives each hypothesis the outputs its real draft gives
    rows = env.probe(screening_sql(query, edits, env.output_column)).rows
    for edit, screened in zip(edits, split_by_hypothesis(rows, len(edits)), strict=True):
        real = evaluator.evaluate(edit.apply(query).sql(dialect="duckdb"), "train")
        assert [r.output for r in env.score_outputs(screened).rows] == [r.output for r in real.rows], edit
    evaluator.close()


@pytest.mark.parametrize("case", sorted(CASES))
def test_draft_tests_in_the_engine_equal_the_evaluators(tmp_path: Path, case: str, monkeypatch) -> None:
    monkeypatch.setattr(hypothesis_scoring, "ENGINE_DRAFT_ROWS", 1)  # these packs are small
    contract, scorer, labels, parent_sql, leaves = CASES[case]
    task = _pack(tmp_path, case, contract, scorer, labels)
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    query = sqlglot.parse_one(parent_sql, read="duckdb")
    numeric = contract in ("INTEGER", "DOUBLE")
    parent = env.test_draft(parent_sql)
    drafts = [f"SELECT id, label FROM ({parent_sql}) AS q WHERE id > 'r05'", "SELECT id, label FROM nowhere"]
    drafts += [edit.apply(query).sql(dialect="duckdb") for edit in _edits(query, leaves)[::3]]
    fell_back: list[str] = []
    env.test_draft = lambda code: fell_back.append(code) or evaluator.evaluate(code, "train")  # type: ignore[method-assign]
    scorer_ = DraftScorer(env, parent_sql, parent, numeric, PENALTY)
    for code in drafts:
        reference = evaluator.evaluate(code, "train")
        assert scorer_.test(code) == (_net_gain(parent, reference, numeric), reference.score), code
    # Only the rejected draft, and drafts whose output type differs from the parent's, go through the evaluator.
    assert fell_back[0] == drafts[1]
    assert len(fell_back) == 1 or case == "integer_with_float_leaves"
    evaluator.close()


def test_small_training_sets_test_drafts_through_the_evaluator(lockpicking_env) -> None:
    task, evaluator = lockpicking_env
    env = DraftEnvironment(evaluator)
    parent = env.test_draft(task.seed_program)
    assert len(parent.rows) < hypothesis_scoring.ENGINE_DRAFT_ROWS
    before = env.probes_run
    code = task.seed_program.replace(
        "ELSE 1 END)\n  + (CASE WHEN p3", "WHEN p2 = 8 THEN 0 ELSE 1 END)\n  + (CASE WHEN p3"
    )
    assert code != task.seed_program
    gain, score = DraftScorer(env, task.seed_program, parent, True, PENALTY).test(code)
    reference = evaluator.evaluate(code, "train")
    assert (gain, score) == (_net_gain(parent, reference, True), reference.score)
    assert env.probes_run == before


def _seed_guards(
    task: TaskPack, env: DraftEnvironment, targets: int
) -> tuple[exp.Select, Outcome, list[Edit]]:
    """The seed's parsed query, its training outcome, and the guards fitted to its first failing rows."""
    mutator = OfflineMutator()
    query = mutator._parse(task.seed_program, env)
    parent = env.test_draft(task.seed_program)
    failing = [r.instance_id for r in parent.rows if r.score < 1][:targets]
    additions = [
        e
        for t in failing
        for e in duplicate_guard(query, mutator._profile_scopes(query, env, t), mutator._fires(env, t))
    ]
    return query, parent, additions


def test_lockpicking_screening_and_joint_fit_effects_match(lockpicking_env) -> None:
    """The real pack: guards, swaps, drops and donor arms; the joint fit's per-row output changes, in order."""
    task, evaluator = lockpicking_env
    env, engine = DraftEnvironment(evaluator), EngineOnly(evaluator)
    query, parent, additions = _seed_guards(task, env, 4)
    edits = screenable(query, additions[:80] + swap_guard(query, additions[:5]) + drop_guard(query))
    assert {e.operator for e in edits} == {"duplicate_guard", "swap_guard", "drop_guard"}
    scores = score_hypotheses(engine, query, edits, parent, True, PENALTY)
    assert [(s.gain, s.fixed, s.broken) for s in scores] == _reference(env, query, edits, parent, True)

    shape = additive_shape(query, "label")
    base = strip_point_guards(query, shape)
    conditions = [sqlglot.parse_one(f"p{p} = {d}") for p in range(1, 7) for d in range(10)]
    fit_edits = screenable(base, guard_edits(shape, conditions))
    base_outcome = env.test_draft(base.sql(dialect="duckdb"))
    rows = env.probe(screening_sql(base, fit_edits, "label")).rows
    reference = changes_from_rows(split_by_hypothesis(rows, len(fit_edits)), base_outcome)
    assert output_changes(engine, base, fit_edits) == reference and reference


def test_the_labels_a_probe_sees_are_the_training_rows_only(tmp_path: Path) -> None:
    task = _pack(tmp_path, "labels", "VARCHAR", "exact", [f"l{i}'s" for i in range(60)])
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    rows = env.probe(f"SELECT pos, id, expected FROM {env.labels_sql()} ORDER BY pos").rows
    train = task.split("train").expected
    assert rows == [(pos, i, train[i]) for pos, i in enumerate(train)]
    held_out = set(task.split("val").expected) | set(task.split("test").expected)
    assert held_out and not any(i in env.labels_sql() for i in held_out)
    evaluator.close()


def test_labels_that_sql_cannot_hold_exactly_keep_the_python_path(tmp_path: Path) -> None:
    """Integers past 2^53 do not survive a DOUBLE: the engine reports it and the Python path scores instead."""
    big = [str(2**60 + i) for i in range(60)]
    task = _pack(tmp_path, "big", "INTEGER", "exact", big)
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    parent_sql = f"SELECT id, CASE WHEN n < 10 THEN {2**60} ELSE {2**60 + 1} END AS label FROM input"
    query = sqlglot.parse_one(parent_sql, read="duckdb")
    edits = _edits(query, [str(2**60 + 3)])
    parent = env.test_draft(parent_sql)
    scores = score_hypotheses(env, query, edits, parent, True, PENALTY)
    assert [(s.gain, s.fixed, s.broken) for s in scores] == _reference(env, query, edits, parent, True)
    evaluator.close()


def test_same_rows_holds_only_when_hypotheses_cannot_change_the_rows() -> None:
    def same(sql: str) -> bool:
        return _same_rows(sqlglot.parse_one(sql, read="duckdb"))

    assert same("SELECT id, CASE WHEN a = 1 THEN 0 ELSE 1 END AS label FROM t WHERE b > 2")
    assert not same("SELECT id, 1 AS label FROM t WHERE CASE WHEN a = 1 THEN TRUE ELSE FALSE END")
    assert not same("SELECT CASE WHEN a = 1 THEN 'x' ELSE id END AS id, 1 AS label FROM t")
    assert not same("SELECT DISTINCT id, CASE WHEN a = 1 THEN 0 ELSE 1 END AS label FROM t")
    assert not same("SELECT id, CASE WHEN a = 1 THEN 0 ELSE 1 END AS label FROM t LIMIT 5")
    assert not same("SELECT id, SUM(CASE WHEN a = 1 THEN 0 ELSE 1 END) AS label FROM t GROUP BY id")
    assert not same("SELECT id, unnest(CASE WHEN a = 1 THEN [0] ELSE [1, 2] END) AS label FROM t")


@pytest.fixture
def lockpicking_env():
    task = load_task("lockpicking6")
    evaluator = Evaluator(task)
    yield task, evaluator
    evaluator.close()


def test_the_screening_query_gives_the_same_rows_and_scores_on_a_warehouse(lockpicking_env) -> None:
    """The screening query is written in DuckDB; a warehouse (a Snowpark local-testing session: Snowflake SQL over
    the staged training rows) reads it in its own dialect, and scores its rows in Python: the same outputs, and
    the same gains as the in-engine scoring in DuckDB."""
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed")
    from snowflake.snowpark import Session

    from coco_sql.engines.snowflake.store import SnowparkStore
    from coco_sql.languages.sql import SqlLanguage

    task, evaluator = lockpicking_env
    env = DraftEnvironment(evaluator)
    session = Session.builder.config("local_testing", True).create()
    remote = Evaluator(task, language=SqlLanguage(task, SnowparkStore(session).candidate_engine()))
    warehouse = DraftEnvironment(remote)
    try:
        query, parent, additions = _seed_guards(task, env, 2)
        edits = screenable(query, additions[:30] + drop_guard(query))
        sql = screening_sql(query, edits, env.output_column)
        assert sorted(warehouse.probe(sql).rows) == sorted(env.probe(sql).rows)
        in_duckdb = score_hypotheses(env, query, edits, parent, True, PENALTY)
        on_warehouse = score_hypotheses(
            warehouse, query, edits, warehouse.test_draft(task.seed_program), True, PENALTY
        )
        assert [(s.gain, s.fixed, s.broken) for s in on_warehouse] == [
            (s.gain, s.fixed, s.broken) for s in in_duckdb
        ]
        assert warehouse.labels_sql() is None  # the Python path scored them there
    finally:
        remote.close()
        session.close()
