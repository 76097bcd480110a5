"""Each history and report query's question answered again with pandas over the raw tables, independently of its
SQL (no shared text, no engine): `REFERENCES[kind][name](tables, params) -> rows`.

The tables are plain DataFrames of every column of each table (`tables["programs"]`, ...), read from whichever
store is being checked. Rows are dicts in the query's column order; a missing value is None."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pandas as pd

from coco_sql.store.history_sql import withheld_error

Tables = dict[str, pd.DataFrame]
Rows = list[dict[str, Any]]


def _v(value: Any) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    return value.item() if hasattr(value, "item") else value


def _records(frame: pd.DataFrame, columns: list[str]) -> Rows:
    return [{c: _v(row[c]) for c in columns} for _, row in frame.iterrows()]


def _programs(t: Tables, run: int) -> pd.DataFrame:
    return t["programs"][t["programs"].run_id == run]


def _score(t: Tables, run: int, pid: Any, split: str) -> Any:
    s = t["program_scores"]
    found = s[(s.run_id == run) & (s.program_id == pid) & (s.split == split)]
    return _v(found.score.iloc[0]) if len(found) else None


def _minus(a: Any, b: Any) -> Any:
    return None if a is None or b is None else a - b


def _with_scores(t: Tables, run: int, frame: pd.DataFrame, pid: str = "program_id") -> pd.DataFrame:
    frame = frame.copy()
    frame["val_score"] = [_score(t, run, p, "val") for p in frame[pid]]
    frame["train_score"] = [_score(t, run, p, "train") for p in frame[pid]]
    return frame


def _train(t: Tables, run: int) -> pd.DataFrame:
    e = t["evaluations"]
    return e[(e.run_id == run) & (e.split == "train")]


# -- history --------------------------------------------------------------------------------------------------
def has_program(t: Tables, p: dict) -> Rows:
    found = _programs(t, p["run_id"])
    return _records(found[found.program_id == p["program_id"]], ["program_id"])


def has_train_instance(t: Tables, p: dict) -> Rows:
    found = _train(t, p["run_id"])
    return _records(found[found.instance_id == p["instance_id"]].head(1), ["instance_id"])


def iterations(t: Tables, p: dict) -> Rows:
    its = _programs(t, p["run_id"]).iteration
    return [{"first": _v(its.min()) if len(its) else None, "last": _v(its.max()) if len(its) else None}]


def program(t: Tables, p: dict) -> Rows:
    run, rows = p["run_id"], []
    for _, r in _programs(t, run)[lambda f: f.program_id == p["program_id"]].iterrows():
        train = _train(t, run)
        shown = r.error is None or ((train.program_id == r.program_id) & (train.error == r.error)).any()
        error = _v(r.error) if shown else withheld_error(r.error)
        rows.append({**{c: _v(r[c]) for c in ["program_id", "iteration", "parent_id", "donor_id", "island", "cell",
                                               "approach", "strategy", "valid"]},
                     "error": error, "val_score": _score(t, run, r.program_id, "val"),
                     "train_score": _score(t, run, r.program_id, "train"), "code": r.code})  # fmt: skip
    return rows


def parent(t: Tables, p: dict) -> Rows:
    run, rows = p["run_id"], []
    for _, r in _programs(t, run)[lambda f: f.program_id == p["program_id"]].iterrows():
        v, pv = _score(t, run, r.program_id, "val"), _score(t, run, _v(r.parent_id), "val")
        rows.append({"program_id": r.program_id, "iteration": r.iteration, "val_score": v, "parent_id": _v(r.parent_id),
                     "parent_val_score": pv, "delta": _minus(v, pv), "donor_id": _v(r.donor_id),
                     "donor_val_score": _score(t, run, _v(r.donor_id), "val")})  # fmt: skip
    return rows


def children(t: Tables, p: dict) -> Rows:
    run = p["run_id"]
    kids = _with_scores(
        t, run, _programs(t, run)[lambda f: f.parent_id == p["program_id"]].sort_values("iteration")
    )
    mine = _score(t, run, p["program_id"], "val")
    kids["delta"] = [_minus(_v(v), mine) for v in kids.val_score]
    return _records(kids, ["program_id", "iteration", "valid", "val_score", "delta", "approach", "strategy"])


def lineage(t: Tables, p: dict) -> Rows:
    run = p["run_id"]
    programs = _with_scores(t, run, _programs(t, run)).set_index("program_id", drop=False)
    rows, current, depth = [], programs.loc[p["program_id"]].parent_id, 1
    while _v(current) is not None and depth <= p["depth"]:
        a = programs.loc[current]
        rows.append({"depth": depth, **{c: _v(a[c]) for c in ["program_id", "iteration", "parent_id", "val_score",
                                                               "train_score", "approach", "strategy"]}})  # fmt: skip
        current, depth = a.parent_id, depth + 1
    return rows


def best_programs(t: Tables, p: dict) -> Rows:
    run = p["run_id"]
    found = _with_scores(t, run, _programs(t, run))
    found = found[found.valid & found.val_score.notna()]
    found = found.assign(key=-found.val_score).sort_values(["key", "iteration"]).head(p["n"])
    return _records(found, ["program_id", "iteration", "val_score", "train_score", "parent_id", "island", "cell",
                            "approach", "strategy"])  # fmt: skip


def _occupants(t: Tables, run: int) -> pd.DataFrame:
    a = t["archive_entries"][t["archive_entries"].run_id == run].sort_values(["iteration", "seq"])
    return a.groupby(["island", "cell"], as_index=False).last()


def diverse_programs(t: Tables, p: dict) -> Rows:
    run = p["run_id"]
    occupants = _with_scores(t, run, _occupants(t, run))
    occupants["iteration"] = [int(_programs(t, run).set_index("program_id").loc[pid].iteration)
                              for pid in occupants.program_id]  # fmt: skip
    rows = []
    for cell, group in occupants.groupby("cell"):
        group = group.assign(key=-group.val_score.fillna(-1.0)).sort_values(["key", "iteration", "island"])
        best = group.iloc[0]
        rows.append({"cell": cell, "program_id": best.program_id, "iteration": _v(best.iteration),
                     "val_score": _v(best.val_score), "train_score": _v(best.train_score),
                     "approach": _programs(t, run).set_index("program_id").loc[best.program_id].approach,
                     "islands": sorted(int(i) for i in group.island)})  # fmt: skip
    return sorted(
        rows, key=lambda r: (r["val_score"] is None, -(r["val_score"] or 0), r["iteration"], r["cell"])
    )


def architecture_history(t: Tables, p: dict) -> Rows:
    run = p["run_id"]
    a = t["archive_entries"][t["archive_entries"].run_id == run]
    if p["cell"] is not None:
        a = a[a.cell == p["cell"]]
    a = a.sort_values(["iteration", "seq"])
    a["replaced_id"] = a.groupby(["island", "cell"]).program_id.shift(1)
    programs = _programs(t, run).set_index("program_id")
    a = a[a.program_id.isin(programs.index)]
    return [{**{c: _v(r[c]) for c in ["iteration", "seq", "island", "cell", "program_id", "reason"]},
             "val_score": _score(t, run, r.program_id, "val"), "replaced_id": _v(r.replaced_id),
             "replaced_val_score": _score(t, run, _v(r.replaced_id), "val"),
             "approach": programs.loc[r.program_id].approach} for _, r in a.iterrows()]  # fmt: skip


def recent_scores(t: Tables, p: dict) -> Rows:
    run = p["run_id"]
    programs = _with_scores(t, run, _programs(t, run)).sort_values("iteration")
    programs["val_score"] = [
        _v(v) if ok else None for v, ok in zip(programs.val_score, programs.valid, strict=True)
    ]
    cut = programs.iteration.max() - p["n"]
    earlier = [
        v for v, i in zip(programs.val_score, programs.iteration, strict=True) if i <= cut and v is not None
    ]
    best = max(earlier) if earlier else None
    ledger = t["ledger"][t["ledger"].run_id == run].set_index("iteration")
    rows = []
    for _, r in programs[programs.iteration > cut].iterrows():
        if r.val_score is not None:
            best = r.val_score if best is None else max(best, r.val_score)
        status = ledger.status.get(r.iteration)
        rows.append({**{c: _v(r[c]) for c in ["iteration", "program_id", "parent_id", "valid", "val_score"]},
                     "best_so_far": best, "status": _v(status),
                     "score_delta": _v(ledger.score_delta.get(r.iteration)) if status is not None else None})  # fmt: skip
    return rows


def thinking_trace(t: Tables, p: dict) -> Rows:
    e = t["events"]
    e = e[(e.run_id == p["run_id"]) & (e.iteration == p["iteration"])].sort_values(["created_at", "seq"])
    return _records(e, ["iteration", "kind", "program_id", "payload"])


def thinking_turns(t: Tables, p: dict) -> Rows:
    a = t["agent_turns"]
    a = a[(a.run_id == p["run_id"]) & (a.iteration == p["iteration"])]
    a = a.assign(rank=[{"reflector": 0, "proposer": 1}.get(x, 2) for x in a.agent]).sort_values(
        ["rank", "agent", "turn"]
    )
    return _records(a, ["agent", "turn", "role", "content", "tool_calls", "tool_call_id", "tool_name", "input_tokens",
                        "output_tokens", "template", "model"])  # fmt: skip


def _row_scores(t: Tables, p: dict) -> pd.DataFrame:
    e = _train(t, p["run_id"])
    e = e[e.instance_id == p["instance_id"]]
    return e.merge(_programs(t, p["run_id"])[["program_id", "iteration", "parent_id", "approach", "strategy"]],
                   on="program_id", suffixes=("", "_p"))  # fmt: skip


def question_solvers(t: Tables, p: dict) -> Rows:
    rows = _row_scores(t, p)
    own = dict(zip(rows.program_id, rows.score, strict=True))
    top = rows.assign(key=-rows.score).sort_values(["key", "iteration"]).head(p["n"])
    return [{"program_id": r.program_id, "iteration": r.iteration, "score": r.score, "output": _v(r.output),
             "error": _v(r.error), "val_score": _score(t, p["run_id"], r.program_id, "val"),
             "parent_id": _v(r.parent_id), "parent_score": _v(own.get(r.parent_id)), "approach": r.approach}
            for _, r in top.iterrows()]  # fmt: skip


def question_memory(t: Tables, p: dict) -> Rows:
    rows = _row_scores(t, p).set_index("program_id", drop=False)
    found = []
    for _, c in rows[rows.parent_id.notna()].iterrows():
        if c.parent_id in rows.index and c.score < rows.loc[c.parent_id].score:
            q = rows.loc[c.parent_id]
            found.append({"child_id": c.program_id, "iteration": c.iteration, "parent_id": c.parent_id,
                          "child_score": c.score, "parent_score": q.score, "delta": c.score - q.score,
                          "child_output": _v(c.output), "parent_output": _v(q.output), "approach": c.approach,
                          "strategy": c.strategy})  # fmt: skip
    latest = sorted(found, key=lambda r: -r["iteration"])[: p["n"]]
    return sorted(latest, key=lambda r: r["iteration"])


def row_trace(t: Tables, p: dict) -> Rows:
    e = _train(t, p["run_id"])
    e = e[(e.program_id == p["program_id"]) & (e.instance_id == p["instance_id"])]
    return [{"instance_id": r.instance_id, "score": r.score, "output": _v(r.output), "error": _v(r.error),
             "observation": _v(r.observation)} for _, r in e.iterrows()]  # fmt: skip


def suggested_questions(t: Tables, p: dict) -> Rows:
    train = _train(t, p["run_id"])
    population = train.groupby("instance_id").score.agg(
        population_best="max", solvers=lambda s: int((s >= 0.9).sum())
    )
    mine = train[train.program_id == p["program_id"]].join(population, on="instance_id")
    mine = mine.assign(key=-mine.population_best).sort_values(["score", "key", "instance_id"]).head(p["n"])
    return _records(
        mine, ["instance_id", "score", "output", "expected", "error", "population_best", "solvers"]
    )


def primitives(t: Tables, p: dict) -> Rows:
    run, rows = p["run_id"], []
    trials = t["primitive_trials"][t["primitive_trials"].run_id == run]
    for _, q in t["primitives"][t["primitives"].run_id == run].iterrows():
        mine = trials[trials.focus == q["name"]]
        verified, helped = int(mine.verified.sum()), int((mine.verified & mine.improved).sum())
        rows.append({**{c: _v(q[c]) for c in ["name", "language", "signature", "how", "origin_program",
                                               "created_iteration"]},
                     "posterior_mean": (1 + helped) / (2 + verified), "trials": verified, "improved": helped,
                     "violations": int((~mine.verified).sum()), "code": q.code})  # fmt: skip
    rows.sort(key=lambda r: (-r["posterior_mean"], r["created_iteration"], r["name"]))
    return rows[: p["n"]]


def primitive_helped(t: Tables, p: dict) -> Rows:
    x = t["primitive_trials"]
    x = x[(x.run_id == p["run_id"]) & x.verified & x.improved & x.focus.notna()]
    x = x.rename(columns={"focus": "name"}).sort_values(["iteration", "program_id", "operator", "name"])
    return _records(x, ["name", "iteration", "program_id", "operator", "parent_score", "child_score"])


def hard_questions(t: Tables, p: dict) -> Rows:
    g = _train(t, p["run_id"]).groupby("instance_id").score
    found = pd.DataFrame({"population_best": g.max(), "mean_score": g.mean(), "solvers": g.agg(lambda s: int((s >= 0.9).sum())),
                          "programs": g.size()}).reset_index()  # fmt: skip
    found = found.sort_values(["population_best", "mean_score", "instance_id"]).head(p["n"])
    return _records(found, ["instance_id", "population_best", "mean_score", "solvers", "programs"])


# -- report ----------------------------------------------------------------------------------------------------
def run_overview(t: Tables, p: dict) -> Rows:
    rows = []
    for _, r in t["runs"].sort_values("run_id").iterrows():
        programs = _with_scores(t, r.run_id, _programs(t, r.run_id))
        rows.append({**{c: _v(r[c]) for c in ["run_id", "task", "seed", "budget", "status"]},
                     "iterations": _v(programs.iteration.max()), "best_val": _v(programs.val_score.max())})  # fmt: skip
    return rows


def _leaderboard(t: Tables, run: int) -> pd.DataFrame:
    board = _with_scores(t, run, _programs(t, run))
    board["test_score"] = [_score(t, run, pid, "test") for pid in board.program_id]
    board["val_rank"] = board.val_score.rank(method="min", ascending=False, na_option="bottom").astype(int)
    return board


def leaderboard(t: Tables, p: dict) -> Rows:
    board = _leaderboard(t, p["run_id"])
    board = (
        board.assign(key=-board.val_score.fillna(-math.inf)).sort_values(["key", "iteration"]).head(p["n"])
    )
    return _records(board, ["program_id", "iteration", "parent_id", "island", "cell", "approach", "val_score",
                            "train_score", "test_score", "val_rank"])  # fmt: skip


def report_lineage(t: Tables, p: dict) -> Rows:
    run = int(p["program_id"].split("-")[0])
    rows = lineage(t, {**p, "run_id": run, "depth": 10**6})
    programs = _programs(t, run).set_index("program_id")
    return [{"depth": r["depth"], "program_id": r["program_id"], "iteration": r["iteration"],
             "approach": r["approach"], "strategy": _v(programs.loc[r["program_id"]].strategy),
             "val_score": r["val_score"]} for r in rows]  # fmt: skip


def row_solvers(t: Tables, p: dict) -> Rows:
    e = t["evaluations"]
    e = e[
        (e.run_id == p["run_id"])
        & (e.split == p["split"])
        & (e.instance_id == p["instance_id"])
        & (e.score >= 0.9)
    ]
    e = e.merge(t["programs"][["program_id", "iteration", "parent_id"]], on="program_id")
    e = e.assign(key=-e.score).sort_values(["key", "iteration"])
    return _records(e, ["program_id", "iteration", "parent_id", "score"])


def _usage(t: Tables, run: int) -> pd.DataFrame:
    u = t["ai_usage"][t["ai_usage"].run_id == run].copy()
    u["provider_calls"] = u.calls - u.cache_hits
    u["input_tokens_without_cache"] = u.input_tokens + u.cached_input_tokens
    u["output_tokens_without_cache"] = u.output_tokens + u.cached_output_tokens
    u["provider_latency_ms"] = u.latency_ms
    return u


_SPENT = ["calls", "provider_calls", "cache_hits", "errors", "input_tokens", "output_tokens"]


def _sums(frame: pd.DataFrame, keys: list[str], columns: list[str], descending: bool = False) -> Rows:
    grouped = frame.groupby(keys, as_index=False)[columns].sum().sort_values(keys, ascending=not descending)
    return _records(grouped, keys + columns)


def cost_phases(t: Tables, p: dict) -> Rows:
    u = _usage(t, p["run_id"])
    u["phase"] = ["report" if s == "test" else "mutator" if s == "mutator" else "search" for s in u.split]
    return _sums(u, ["phase"], [*_SPENT, "input_tokens_without_cache", "output_tokens_without_cache",
                                "provider_latency_ms"], descending=True)  # fmt: skip


def cost_agents(t: Tables, p: dict) -> Rows:
    u = _usage(t, p["run_id"])
    u = u[u.split == "mutator"].rename(columns={"function": "agent"})
    return _sums(u, ["agent", "model"], [*_SPENT, "provider_latency_ms"])


def run_spend(t: Tables, p: dict) -> Rows:
    return _sums(_usage(t, p["run_id"]), ["model"], ["input_tokens", "output_tokens"])


def deploy_costs(t: Tables, p: dict) -> Rows:
    run, u = p["run_id"], t["ai_usage"]
    spent = u[u.split == "val"].groupby("program_id")
    s = t["program_scores"]
    s = s[(s.run_id == run) & (s.split == "val") & (s.n_rows > 0)]
    s = s[s.n_rows == s.n_rows.max()].merge(
        _programs(t, run)[["program_id", "iteration", "valid"]], on="program_id"
    )
    rows = []
    for _, r in s[s.valid].sort_values("iteration").iterrows():

        def per_1000(column: str, cached: str | None = None, r: Any = r) -> float:
            if r.program_id not in spent.groups:
                return 0.0
            group = spent.get_group(r.program_id)
            return float(group[column].sum() + (group[cached].sum() if cached else 0)) * 1000 / r.n_rows

        rows.append({"program_id": r.program_id, "iteration": r.iteration, "val_score": r.score, "n_rows": r.n_rows,
                     "calls_per_1000": per_1000("calls"),
                     "input_tokens_per_1000": per_1000("input_tokens", "cached_input_tokens"),
                     "output_tokens_per_1000": per_1000("output_tokens", "cached_output_tokens")})  # fmt: skip
    return rows


def deploy_cost_models(t: Tables, p: dict) -> Rows:
    u = _usage(t, p["run_id"])
    u = u[u.split == "val"].rename(
        columns={"input_tokens_without_cache": "in", "output_tokens_without_cache": "out"}
    )
    rows = _sums(u, ["program_id", "model"], ["calls", "in", "out"])
    return [{"program_id": r["program_id"], "model": r["model"], "calls": r["calls"], "input_tokens": r["in"],
             "output_tokens": r["out"]} for r in rows]  # fmt: skip


def cost_splits(t: Tables, p: dict) -> Rows:
    return _sums(
        _usage(t, p["run_id"]),
        ["split"],
        [*_SPENT, "input_tokens_without_cache", "output_tokens_without_cache"],
    )


def cost_iterations(t: Tables, p: dict) -> Rows:
    u = _usage(t, p["run_id"])
    u["tokens"] = u.input_tokens + u.output_tokens
    return _sums(u, ["iteration"], ["provider_calls", "cache_hits", "tokens"])


def split_rows(t: Tables, p: dict) -> Rows:
    e = t["evaluations"]
    e = e[(e.run_id == p["run_id"]) & (e.program_id == p["program_id"]) & (e.split == p["split"])]
    return _records(e.sort_values("instance_id"), ["instance_id", "score", "output", "expected", "error"])


def label_errors(t: Tables, p: dict) -> Rows:
    """The run's flagged rows, each with what the program answered on it in training (None where it has no row)."""
    flagged = t["label_errors"]
    flagged = flagged[flagged.run_id == p["run_id"]].sort_values("instance_id")
    e = t["evaluations"]
    answered = e[(e.run_id == p["run_id"]) & (e.program_id == p["program_id"]) & (e.split == "train")]
    answers = dict(zip(answered.instance_id, answered.output, strict=True))
    return [{**{c: _v(r[c]) for c in ["instance_id", "text", "label", "neighbours_label", "neighbour_share",
                                       "programs"]}, "answer": _v(answers.get(r.instance_id))}
            for _, r in flagged.iterrows()]  # fmt: skip


Reference = Callable[[Tables, dict], Rows]
REFERENCES: dict[str, dict[str, Reference]] = {
    "history": {name: globals()[name] for name in (
        "has_program", "has_train_instance", "iterations", "program", "parent", "children", "lineage", "best_programs",
        "diverse_programs", "architecture_history", "recent_scores", "thinking_trace", "thinking_turns",
        "question_solvers", "question_memory", "row_trace", "suggested_questions", "primitives",
        "primitive_helped", "hard_questions")},
    "report": {"run_overview": run_overview, "leaderboard": leaderboard, "lineage": report_lineage,
               "row_solvers": row_solvers, "cost_phases": cost_phases, "cost_agents": cost_agents,
               "run_spend": run_spend, "deploy_costs": deploy_costs, "deploy_cost_models": deploy_cost_models,
               "cost_splits": cost_splits, "cost_iterations": cost_iterations, "split_rows": split_rows,
               "label_errors": label_errors},
}  # fmt: skip
