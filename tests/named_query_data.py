"""A small synthetic store for the named-query tests: two runs whose rows hit every branch of the history and
report queries (invalid programs, missing and tied scores, errors withheld or not, a cell on two islands,
migrations, regressions, primitives verified or not, agent turns of three roles, AI usage on every split), written
as `IterationBatch`es so that each store writes them its own way. Seeded: the same batches every time."""

from __future__ import annotations

import random

import numpy as np

from coco_sql.llm.cache import CachedEmbedding, CachedResponse
from coco_sql.llm.usage import ProviderCall, Usage
from coco_sql.store import (
    ArchiveEntry,
    EvaluationRow,
    Event,
    IterationBatch,
    LedgerEntry,
    ProgramRecord,
    ProgramScore,
    RunRecord,
    SplitEvaluation,
    program_id_for,
)
from coco_sql.store.records import AgentTurn, LabelError, Primitive, PrimitiveTrial

SPLITS = {
    "train": [f"t{k}" for k in range(8)],
    "val": [f"v{k}" for k in range(5)],
    "test": ["x0", "x1", "x2"],
}
SCORES = (0.0, 0.25, 0.5, 0.9, 1.0)
CELLS = ("c0", "c1", "c2")


def batches(run_id: int, iterations: int, seed: int) -> list[IterationBatch]:
    """One run: the seed at iteration 0, a child per iteration after it, and a finish batch."""
    rng = random.Random(seed)
    out: list[IterationBatch] = []
    made: list[ProgramRecord] = []
    scores: dict[str, float] = {}
    for t in range(iterations + 1):
        parent = rng.choice(made) if made else None
        valid = t == 0 or rng.random() < 0.8
        error = None if valid else f"boom {t % 3}"
        pid = program_id_for(run_id, t)
        program = ProgramRecord(
            program_id=pid, run_id=run_id, iteration=t, parent_id=parent.program_id if parent else None,
            donor_id=rng.choice(made).program_id if made and rng.random() < 0.3 else None,
            code=f"SELECT id, {t} AS label FROM input", language="sql", dialect="duckdb",
            island=rng.randrange(2), cell=rng.choice(CELLS) if valid else None,
            approach=f"approach {t}", strategy=rng.choice(("hillclimb", "restructure")), valid=valid, error=error,
        )  # fmt: skip
        made.append(program)
        evaluations = _evaluations(rng, program, t)
        val = next((e.summary.score for e in evaluations if e.summary.split == "val"), None)
        if val is not None:
            scores[pid] = val
        archive = []
        if valid and (t == 0 or rng.random() < 0.7):
            archive.append(
                ArchiveEntry(
                    t, 0, program.island, program.cell or "c0", pid, "seed" if t == 0 else "admitted"
                )
            )
            if rng.random() < 0.4:  # the same occupant migrates to the other island
                archive.append(ArchiveEntry(t, 1, 1 - program.island, program.cell or "c0", pid, "migrated"))
        ledger = ()
        if t > 0:
            before = scores.get(parent.program_id) if parent else None
            delta = None if val is None or before is None else val - before
            status = (
                "failed"
                if val is None
                else "improved"
                if (delta or 0) > 0
                else "regressed"
                if (delta or 0) < 0
                else "neutral"
            )
            ledger = (
                LedgerEntry(
                    t,
                    pid,
                    program.strategy or "hillclimb",
                    "hillclimb",
                    status,
                    before,
                    val,
                    delta,
                    None,
                    f"note {t}",
                ),
            )
        events = (
            Event(t, "run_started" if t == 0 else "parent_selected", parent.program_id if parent else None, {"t": t}),
            Event(t, "mutation", pid, {"why": f"because {t}", "n": [t, t + 1]}),
            Event(t, "admitted" if archive else "rejected", pid, {}),
        )  # fmt: skip
        out.append(
            IterationBatch(
                run_id, t, new_run=_run(run_id, iterations, seed) if t == 0 else None, programs=(program,),
                evaluations=evaluations, archive=tuple(archive), ledger=ledger, events=events,
                agent_turns=_turns(rng, t), mutator_usage=_usage(rng, t, "agent") if t % 2 else None,
                drafts_usage=_usage(rng, t, "AI_COMPLETE") if t % 3 == 1 else None, drafts_program_id=pid,
                primitives=_primitives(run_id, t), primitive_trials=_trials(rng, t, pid),
                ai_cache=(CachedResponse(f"k{run_id}-{t}", "AI_COMPLETE", "m", f"r{t}", 3, 4, 5.0),),
                ai_embeddings=(CachedEmbedding("e", f"h{run_id}-{t}", np.array([0.5, -1.25], np.float32), 2),),
            )
        )  # fmt: skip
    out.append(
        IterationBatch(
            run_id,
            iterations,
            finish_run=True,
            events=(Event(iterations, "run_finished", None, {"done": True}),),
            label_errors=_label_errors(run_id),
        )
    )
    return out


def _label_errors(run_id: int) -> tuple[LabelError, ...]:
    """Training rows flagged at the run's end (run 2: one; a text that is absent, a share below one)."""
    rows = SPLITS["train"][run_id : run_id + (3 if run_id == 1 else 1)]
    return tuple(
        LabelError(iid, f"text of {iid}" if k else "", f'"{iid}"', '"other"', 0.75 + 0.125 * k, 5 - k)
        for k, iid in enumerate(rows)
    )


def _run(run_id: int, budget: int, seed: int) -> RunRecord:
    return RunRecord(run_id, f"task{run_id}", f"fp{run_id}", seed, budget, {"seed": seed})


def _evaluations(rng: random.Random, program: ProgramRecord, t: int) -> tuple[SplitEvaluation, ...]:
    """Every split for a valid program (rows sometimes failing); an invalid one fails on its training rows, with
    its own error on some (so `program` shows it) and another on the rest (so it is withheld)."""
    found = []
    for split, ids in SPLITS.items():
        if not program.valid and split != "train":
            continue
        if program.valid and split == "val" and t % 7 == 5:  # a minibatch stopped it: fewer validation rows
            ids = ids[:3]
        rows = []
        for iid in ids:
            score = rng.choice(SCORES) if program.valid else 0.0
            error = (program.error if t % 2 else "other") if not program.valid else None
            rows.append(EvaluationRow(iid, score, None if error else f'"{iid}-{score}"', f'"{iid}"', error,
                                      {"seen": iid}, rng.randrange(3), rng.randrange(50), rng.randrange(9), 1.5))  # fmt: skip
        mean = sum(r.score for r in rows) / len(rows)
        usage = _usage(rng, t, "AI_CLASSIFY") if rng.random() < 0.6 else None
        summary = ProgramScore(program.program_id, split, mean, len(rows), sum(r.error is not None for r in rows),
                               sum(r.model_calls for r in rows), 10 * t, t, 2.5, rng.randrange(4))  # fmt: skip
        found.append(SplitEvaluation(summary, tuple(rows), usage))
    return tuple(found)


def _usage(rng: random.Random, t: int, function: str) -> Usage:
    usage = Usage()
    for model in rng.sample(("m1", "m2", "m3"), k=rng.randrange(1, 3)):
        usage.hit(function, model, rng.randrange(1, 4), 7 + t, 2)
        usage.miss(ProviderCall(function, model, "p", 2, 11 + t, 3, 40.0 + t), logical_calls=2, errors=t % 2)
    return usage


def _turns(rng: random.Random, t: int) -> tuple[AgentTurn, ...]:
    if t % 3 != 2:
        return ()
    turns = []
    for agent in rng.sample(("agent", "proposer", "reflector"), k=3):
        turns += [
            AgentTurn(agent, 0, "system", f"system {agent} {t}", template="sys@1"),
            AgentTurn(agent, 1, "assistant", f"call {t}", ({"id": "c1", "name": "peek", "arguments": {"n": t}},),
                      input_tokens=30, output_tokens=5, model="m1"),
            AgentTurn(agent, 2, "tool", f"result {t}", tool_call_id="c1", tool_name="peek"),
        ]  # fmt: skip
    return tuple(turns)


def _primitives(run_id: int, t: int) -> tuple[Primitive, ...]:
    if t not in (1, 3, 4):
        return ()
    name = f"p_{run_id}_{t}"
    return (Primitive(name, "sql", f"CREATE MACRO {name}(a) AS a;", f"{name}(a)", program_id_for(run_id, t), t, "extracted"),)  # fmt: skip


def _trials(rng: random.Random, t: int, pid: str) -> tuple[PrimitiveTrial, ...]:
    if t < 2:
        return ()
    run_id = int(pid.split("-")[0])
    trials = []
    for operator in rng.sample(("P1", "P2", "P3"), k=rng.randrange(1, 3)):
        focus = rng.choice((f"p_{run_id}_1", f"p_{run_id}_3", None))
        verified, improved = rng.random() < 0.75, rng.random() < 0.5
        trials.append(PrimitiveTrial(t, pid, operator, focus, 0.5, 0.75 if improved else 0.25, improved, verified,
                                     None if verified else "broke the contract"))  # fmt: skip
    return tuple(trials)


def all_batches() -> list[IterationBatch]:
    """Run 1 (10 iterations) then run 2 (5): the queries must keep to their run."""
    return batches(1, 10, seed=3) + batches(2, 5, seed=4)
