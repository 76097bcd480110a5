"""PACE in the loop: the P1-P4 operators around the offline mutators, on real lockpicking6 and tsp_construct
runs (real DuckDB, sqlglot, sandboxes), trials and discovery in the tables, resume equality, the history tool
and CLI, and export of a primitive-carrying champion."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pytest

from coco_sql import api
from coco_sql.engine.registry import build_mutator
from coco_sql.evaluate import Evaluator
from coco_sql.languages import language_for
from coco_sql.languages.sql.export.forms import export_form
from coco_sql.languages.sql.pace_edits import refactor_into_call
from coco_sql.mutate import MutationRequest, Proposal
from coco_sql.mutate.pace import PrimitiveAwareMutator, plan_operator, swap_calls
from coco_sql.primitives import Posterior, PrimitiveLibrary, PrimitiveTrial
from coco_sql.primitives.calls import call_set
from coco_sql.primitives.context import PrimitiveContext
from coco_sql.primitives.extraction import extract
from coco_sql.reflect import DraftEnvironment
from coco_sql.reflect.context import ContextBundle, ProgramView
from coco_sql.tasks import load_task
from tests.conftest import run_cli

OPTIONS = {"seed": 1, "primitives": True}


def rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def lockpicking():
    task = load_task("lockpicking6")
    evaluator = Evaluator(task)
    yield task, evaluator, DraftEnvironment(evaluator)
    evaluator.close()


def library_of(task, n: int = 3) -> PrimitiveLibrary:
    """`n` guards of the lockpicking6 seed as macros, extracted one after the other."""
    library = PrimitiveLibrary()
    for i in range(n):
        found = extract(
            task.seed_program, "sql", library, origin_program="1-0", iteration=i, dialect="duckdb"
        )
        assert found is not None
        library = library.add(found)
    return library


def request_for(env, code: str, library: PrimitiveLibrary, others=(), k: int = 3) -> MutationRequest:
    parent = ProgramView("1-5", code, 0.5)
    elites = (parent, *(ProgramView(pid, c, 0.5) for pid, c in others))
    return MutationRequest(
        6, parent, env, ContextBundle(elites=elites), primitives=PrimitiveContext(library, {}, k)
    )


def test_operators_are_drawn_evenly_and_fall_back_to_p3_when_they_cannot_apply(lockpicking) -> None:
    task, _, env = lockpicking
    library = library_of(task)
    first = library.primitives[0]
    calling = refactor_into_call(task.seed_program, first, dialect="duckdb")
    assert calling is not None
    drawn = [
        plan_operator(request_for(env, calling, library), PrimitiveContext(library), "sql", "duckdb", rng)
        for rng in (np.random.default_rng(s) for s in range(200))
    ]
    counts = {op: sum(p.as_notes()["drawn"] == op for p in drawn) for op in ("P1", "P2", "P3", "P4")}
    assert all(35 <= n <= 65 for n in counts.values()), counts  # equal probability
    # no second parent calls a primitive: P4 falls back to P3; P1 and P2 apply
    assert {p.contract.operator for p in drawn if p.as_notes()["drawn"] == "P4"} == {"P3"}
    assert all(p.contract.focus != first.name for p in drawn if p.contract.operator == "P1")
    assert all(p.contract.target == first.name for p in drawn if p.contract.operator == "P2")
    # k = 1 and the parent already calls one: neither P1 nor P4 may add another
    bounded = PrimitiveContext(library, {}, 1)
    for seed in range(40):
        plan = plan_operator(
            request_for(env, calling, library, k=1), bounded, "sql", "duckdb", np.random.default_rng(seed)
        )
        assert plan.contract.operator in ("P2", "P3")


def test_thompson_sampling_exposes_the_primitive_that_helped(lockpicking) -> None:
    task, _, env = lockpicking
    library = library_of(task)
    good, bad = library.primitives[1].name, library.primitives[2].name
    beliefs = {good: Posterior(10, 1), bad: Posterior(1, 10)}
    picks = []
    for seed in range(100):
        plan = plan_operator(
            request_for(env, task.seed_program, library), PrimitiveContext(library, beliefs), "sql", "duckdb",
            np.random.default_rng(seed),
        )  # fmt: skip
        if plan.contract.operator == "P1":
            picks.append(plan.contract.focus)
    assert picks.count(good) > 3 * max(1, picks.count(bad))


@pytest.mark.slow
def test_each_operator_makes_a_valid_child_that_keeps_its_contract(lockpicking) -> None:
    task, evaluator, env = lockpicking
    library = library_of(task)
    first, second = library.primitives[:2]
    calling = refactor_into_call(task.seed_program, first, dialect="duckdb")
    partner = refactor_into_call(task.seed_program, second, dialect="duckdb")
    mutator = PrimitiveAwareMutator(build_mutator("offline", language_for(task), {}), language="sql")
    seen = {}
    for seed in range(24):
        request = request_for(env, calling, library, others=[("1-3", partner)])
        proposal = mutator.propose(request, np.random.default_rng(seed))
        note = proposal.notes["primitive"]
        seen.setdefault(note["operator"], (proposal, note))
    assert set(seen) == {"P1", "P2", "P3", "P4"}
    for operator, (proposal, note) in seen.items():
        assert note["verified"] and note["reason"] is None, (operator, note)
        program = evaluator.check(proposal.code)  # the macros validate and expand
        assert "MACRO" not in program.runnable.upper()
        calls = call_set(proposal.code, "sql", library.names(), dialect="duckdb")
        if operator in ("P1", "P4"):
            assert note["focus"] in calls and first.name in calls
        if operator == "P2":
            assert note["focus"] in calls and first.name not in calls
        if operator == "P3":
            assert calls == {first.name}
    assert seen["P4"][1]["partner"] == "1-3" and seen["P4"][0].donor_id == "1-3"


def test_a_child_that_breaks_its_contract_is_recorded_unverified() -> None:
    """An inner mutator that rewrites the program without its guards: P3's contract fails and says why."""

    class Inliner:
        name = "inliner"

        def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
            return Proposal("SELECT id, 0 AS label FROM input", "answer 0 everywhere")

    task = load_task("lockpicking6")
    library = library_of(task, 1)
    calling = refactor_into_call(task.seed_program, library.primitives[0], dialect="duckdb")
    evaluator = Evaluator(task)
    try:
        env = DraftEnvironment(evaluator)
        mutator = PrimitiveAwareMutator(Inliner(), language="sql")
        request = request_for(env, calling, library)
        request = MutationRequest(
            6, request.parent, env, request.context, primitives=PrimitiveContext(library)
        )
        notes = [mutator.propose(request, np.random.default_rng(s)).notes["primitive"] for s in range(12)]
    finally:
        evaluator.close()
    refined = [n for n in notes if n["operator"] == "P3"]
    assert refined and all(not n["verified"] and "P3" in n["reason"] for n in refined)


@pytest.mark.slow
def test_python_primitives_move_between_programs() -> None:
    task = load_task("tsp_construct")
    library = PrimitiveLibrary()
    code = (
        "import numpy as np\n\n\ndef select_next_node(current_node, destination_node, unvisited_nodes, "
        "distance_matrix):\n    return unvisited_nodes[np.argmin(distance_matrix[current_node][unvisited_nodes]"
        " - 0.3 * distance_matrix[destination_node][unvisited_nodes])]\n"
    )
    first = extract(code, "python", library, origin_program="1-1", iteration=1, entry=task.entry)
    assert first is not None
    library = library.add(first)
    other = PrimitiveLibrary((first,))
    second = extract(task.seed_program, "python", other, origin_program="1-0", iteration=2, entry=task.entry)
    if second is not None:
        library = library.add(second)
    evaluator = Evaluator(task)
    try:
        env = DraftEnvironment(evaluator)
        mutator = PrimitiveAwareMutator(
            build_mutator("offline", language_for(task), {"max_drafts": 4}),
            language="python",
            entry=task.entry,
        )
        request = request_for(env, task.seed_program, library)
        for seed in range(30):
            proposal = mutator.propose(request, np.random.default_rng(seed))
            note = proposal.notes["primitive"]
            if note["operator"] == "P1":
                assert note["verified"], note
                assert note["focus"] in call_set(proposal.code, "python", library.names())
                assert evaluator.evaluate(proposal.code, "train").ok
                break
        else:
            pytest.fail("no P1 in 30 draws")
    finally:
        evaluator.close()
    # P2 in Python: the call is renamed and takes the replacement's own parameters
    assert second is not None
    calling = f"def f(current_node, destination_node, unvisited_nodes, distance_matrix):\n    return {first.signature}\n"
    swapped = swap_calls(calling, "python", first, second, "duckdb")
    assert swapped is not None and second.signature in swapped and f"{first.name}(" not in swapped


@pytest.mark.slow
def test_a_run_with_primitives_records_trials_and_discoveries_and_resumes_exactly(tmp_path: Path) -> None:
    a, b = tmp_path / "a.duckdb", tmp_path / "b.duckdb"
    api.evolve("lockpicking6", db=a, budget=4, options=OPTIONS)
    api.resume(db=a, budget=8)
    api.evolve("lockpicking6", db=b, budget=8, options=OPTIONS)
    for sql in (
        "SELECT iteration, code, valid FROM programs ORDER BY iteration",
        "SELECT name, code, signature, origin_program, created_iteration, how FROM primitives ORDER BY ALL",
        "SELECT iteration, program_id, operator, focus, parent_score, child_score, improved, verified, reason "
        "FROM primitive_trials ORDER BY iteration",
    ):
        assert rows(a, sql) == rows(b, sql), sql
    primitives = rows(a, "SELECT created_iteration, how FROM primitives ORDER BY created_iteration")
    assert primitives[0] == (0, "extracted")  # from the seed, the first history best
    assert len({it for it, _ in primitives}) == len(primitives)  # at most one per iteration
    trials = rows(a, "SELECT iteration, operator FROM primitive_trials ORDER BY iteration")
    assert [it for it, _ in trials] == list(range(1, 9))  # every child once the library is non-empty
    # the ledger names each child's operator, and the view joins it with the trial
    ledger = rows(a, "SELECT iteration, operator, note FROM ledger_primitives WHERE iteration > 0 ORDER BY 1")
    assert [(it, op) for it, op, _ in ledger] == trials
    assert all(note.startswith(f"{op}:") for _, op, note in ledger)
    # the history tool: posterior means from verified trials, and where each primitive helped
    listed = json.loads(run_cli("history", "primitives", "--db", a, cwd=a.parent).stdout)
    assert {p["name"] for p in listed} == {name for (name,) in rows(a, "SELECT name FROM primitives")}
    for p in listed:
        verified = rows(a, f"SELECT count(*) FILTER (verified), count(*) FILTER (verified AND improved) "
                           f"FROM primitive_trials WHERE focus = '{p['name']}'")[0]  # fmt: skip
        assert (p["trials"], p["improved"]) == verified
        assert p["posterior_mean"] == pytest.approx((1 + verified[1]) / (2 + verified[0]))
        assert len(p["helped_in"]) == verified[1]


def test_primitives_off_writes_no_library(tmp_path: Path) -> None:
    api.evolve("lockpicking6", db=tmp_path / "off.duckdb", budget=3, options={"seed": 1})
    assert rows(tmp_path / "off.duckdb", "SELECT count(*) FROM primitives") == [(0,)]
    assert rows(tmp_path / "off.duckdb", "SELECT count(*) FROM primitive_trials") == [(0,)]


def test_export_ships_the_macros_to_duckdb_and_inlines_them_for_snowflake(lockpicking) -> None:
    task, evaluator, _ = lockpicking
    primitive = library_of(task, 1).primitives[0]
    code = refactor_into_call(task.seed_program, primitive, dialect="duckdb")
    assert export_form(code, "duckdb", "sql", name="champion") == code
    for form in ("snowflake_view", "duckdb_view"):
        exported = export_form(code, "duckdb", form, name="champion")
        assert primitive.name not in exported.lower() and "MACRO" not in exported.upper()
    # the DuckDB text runs as is: macros first, then the query, to the same labels as the expanded program
    with duckdb.connect() as con:
        con.register("input", task.split("train").inputs)
        *macros, query = [s for s in code.split(";\n") if s.strip()]
        for macro in macros:
            con.execute(macro)
        direct = sorted(con.execute(query).fetchall())
        expanded = sorted(con.execute(evaluator.check(code).runnable).fetchall())
    assert direct == expanded


def test_trials_only_count_when_verified() -> None:
    from coco_sql.primitives.thompson import posteriors

    library = library_of(load_task("lockpicking6"), 1)
    name = library.primitives[0].name
    trials = [
        PrimitiveTrial(1, "1-1", "P1", name, 0.1, 0.2, True, True),
        PrimitiveTrial(2, "1-2", "P1", name, 0.2, 0.9, True, False, "P1: child does not call the focus"),
    ]
    assert posteriors(library, trials)[name] == Posterior(2.0, 1.0)


def test_the_agent_gets_the_operator_and_the_contract_checker(tmp_path: Path) -> None:
    """With primitives on, a model-driven mutator applies the operator itself: the task prompt states it with
    the definitions, check_primitives answers with the contract's verdict, and the trial records the same."""
    from llm_double import FakeEndpoint, Turn
    from test_agent import ai_for, assistant_turns

    def agent(conversation: list[dict], tools: list[str]) -> Turn:
        step = assistant_turns(conversation)
        if step == 0:
            return Turn("", (("read_candidate", {}),))
        if step == 1:
            code = conversation[-1]["content"]
            return Turn("", (("write_candidate", {"code": code + "\n-- reviewed"}),))
        if step == 2:
            return Turn("", (("check_primitives", {}),))
        return Turn("", (("commit", {"approach": "hillclimb", "description": "keep the parent's logic"}),))

    db = tmp_path / "agent.duckdb"
    options = {
        "seed": 2,
        "primitives": True,
        "mutator": "agent",
        "mutator_settings": {"model": "fake/scripted"},
    }
    with FakeEndpoint(script=agent) as server:
        api.evolve("lockpicking6", db=db, budget=4, options=options, ai=ai_for(server))
    prompts = rows(
        db, "SELECT iteration, content FROM agent_turns WHERE role = 'user' AND turn = 1 ORDER BY 1"
    )
    checks = dict(rows(db, "SELECT iteration, content FROM agent_turns WHERE tool_name = 'check_primitives'"))
    trials = rows(db, "SELECT iteration, operator, focus, verified, reason FROM primitive_trials ORDER BY 1")
    assert [it for it, *_ in trials] == [1, 2, 3, 4]
    for (it, prompt), (_, operator, focus, verified, reason) in zip(prompts, trials, strict=True):
        assert f"{operator} " in prompt and "primitive operator (PACE)" in prompt
        if focus is not None:
            assert f"CREATE MACRO {focus}" in prompt
        assert checks[it].startswith("ok") == verified  # the tool and the recorded trial agree
        assert verified == (reason is None)
    assert any(not verified for *_, verified, _ in trials)  # P1 without inserting the focus is a violation


@pytest.mark.slow
def test_primitives_from_sql_and_the_champion_exported_from_sql(tmp_path: Path) -> None:
    import coco_sql

    con = coco_sql.connect(tmp_path / "sql.duckdb")
    try:
        con.sql("CALL coco_evolve('lockpicking6', 4, {'seed': 1, 'primitives': true})").fetchall()
        ((made,),) = con.sql("SELECT count(*) FROM primitives").fetchall()
        operators = con.sql("SELECT operator FROM ledger_primitives WHERE iteration > 0").fetchall()
        ((view,),) = con.sql("SELECT code FROM coco_export(1, 'snowflake_view')").fetchall()
    finally:
        con.close()
    assert made >= 1 and len(operators) == 4 and all(op is not None for (op,) in operators)
    assert "MACRO" not in view.upper()  # inlined for Snowflake
