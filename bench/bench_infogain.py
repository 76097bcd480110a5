"""InfoGain's top-k neighbour kernel (issue 12): what the restriction changes, and what building it costs.

1. Restriction. On the training rows of goemotions and lockpicking6, the target distribution P(t) of the old
   dense code (the N×N 3-gram cosine `text_kernel` and the Appendix C.3 formulas over all rows, copied below as
   it was before issue 12) against `InfoGainTargets` over the k nearest rows, for several parent-score vectors:
   the seed program's training scores, all failing, random 0/1 vectors (fixed seeds), and a random 0/1 vector
   with 70% of the rows untested (NaN, as a minibatch would leave them). Reported: the total-variation distance
   0.5 sum_t |P_dense(t) - P_sparse(t)| and how many of the dense top-5 targets are in the sparse top 5; and the
   same for the alternative that was not chosen, the transfer term as the mean of kappa over the k + 1 slots of
   N(t) instead of the exact mean over all rows.
2. Recall. The LSH forest (used from 4,096 rows up) against the exact all-pairs top k, forced on 5,000 generated
   lockpicking codes and on all 1,500 goemotions texts: share of the exact top-k kappa and kappa^4 mass found,
   and how often the nearest row is found.
3. Cost. `build_neighbours` on 5,000 and 20,000 generated codes (--size full: also 50,000 and 1,000,000), each in
   a fresh process: wall and CPU seconds (the machine is shared: CPU seconds are the steadier number), that
   process's peak RSS (VmHWM) and its peak before the build (interpreter and texts), the size of the result,
   and the per-iteration cost of targeting (`InfoGainTargets.order`) at that size.

    python bench/bench_infogain.py [--size small|full] [--k 32]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from make_lockpicking6 import CANDIDATES, IN_SET_PROBABILITY

from coco_sql.search.infogain import SOLVED, InfoGainTargets, TargetingContext
from coco_sql.search.neighbours import build_neighbours

SIZES = {"small": (5_000, 20_000), "full": (5_000, 20_000, 50_000, 1_000_000)}
TASKS = ("goemotions", "lockpicking6")


# -- the dense code as it was before issue 12 (reference only: O(N²) memory, and `unit @ unit.T` crashes this
# machine's OpenBLAS from 16,000 rows; used here on a few hundred rows) ----------------------------------------
def text_kernel(texts: Sequence[str], n: int = 3) -> np.ndarray:
    """kappa[i, j]: cosine similarity of character n-gram counts (padded), in [0, 1], with kappa[i, i] = 1."""
    grams = [Counter(f" {t} "[i : i + n] for i in range(max(1, len(t) + 3 - n))) for t in texts]
    vocabulary = {g: k for k, g in enumerate(sorted({g for c in grams for g in c}))}
    matrix = np.zeros((len(texts), len(vocabulary)))
    for row, counts in enumerate(grams):
        for gram, count in counts.items():
            matrix[row, vocabulary[gram]] = count
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit = matrix / np.where(norms == 0, 1.0, norms)
    kappa = np.clip(unit @ unit.T, 0.0, 1.0)
    np.fill_diagonal(kappa, 1.0)
    return kappa


def dense_probabilities(kappa: np.ndarray, context: TargetingContext) -> np.ndarray:
    """The old InfoGainTargets.probabilities over a dense kappa (surrogate, decay, gains, softmax at 0.1)."""
    scores = context.parent_scores
    tested = ~np.isnan(scores)
    if not tested.any():
        surrogate = np.full(scores.shape, 0.7)
    else:
        weights = kappa[:, tested] ** 4
        totals = weights.sum(axis=1)
        estimate = np.where(totals > 0, weights @ scores[tested] / np.where(totals > 0, totals, 1.0), 0.0)
        estimate = np.where(tested, estimate, np.minimum(estimate, 0.7))
        failed = tested & (np.nan_to_num(scores, nan=1.0) < SOLVED)
        surrogate = np.where(failed, np.maximum(estimate, 0.1), estimate)
    counts = np.array([context.failed_targets.get(i, 0) for i in context.ids], dtype=float)
    decay = np.where(context.solved_anywhere, 1.0, 0.5**counts)
    gains = (1.0 - surrogate) * decay * kappa.mean(axis=1)
    eligible = ~(scores >= SOLVED)
    logits = np.where(eligible, gains / 0.1, -np.inf)
    weights = np.exp(logits - logits[eligible].max())
    return weights / weights.sum()


# ------------------------------------------------------------------------------------------------------------
def train_texts(task_name: str) -> tuple[tuple[str, ...], list[str]]:
    """The training rows' ids and texts, joined as `engine.stages.curate.make_curator` joins them."""
    from coco_sql.tasks import load_task  # here, not at the top: the build-cost children stay lean

    inputs = load_task(task_name).split("train").inputs
    texts = [" ".join(str(v) for v in row[1:]) for row in inputs.itertuples(index=False)]
    return tuple(str(i) for i in inputs["id"]), texts


def seed_scores(task_name: str, ids: tuple[str, ...]) -> np.ndarray:
    from coco_sql.evaluate import Evaluator
    from coco_sql.tasks import load_task

    task = load_task(task_name)
    evaluator = Evaluator(task)
    try:
        rows = {r.instance_id: r.score for r in evaluator.evaluate(task.seed_program, "train").rows}
    finally:
        evaluator.close()
    return np.array([rows[i] for i in ids], dtype=float)


def score_vectors(task_name: str, ids: tuple[str, ...]) -> dict[str, np.ndarray]:
    n = len(ids)
    vectors = {"seed": seed_scores(task_name, ids), "all failing": np.zeros(n)}
    for seed in (1, 2, 3):
        vectors[f"random 0/1 (seed {seed})"] = np.random.default_rng(seed).integers(0, 2, n).astype(float)
    rng = np.random.default_rng(4)
    partial = rng.integers(0, 2, n).astype(float)
    partial[rng.random(n) < 0.7] = np.nan
    vectors["random 0/1, 70% untested (seed 4)"] = partial
    return vectors


def neighbourhood_mean_probabilities(picker: InfoGainTargets, context: TargetingContext) -> np.ndarray:
    """The alternative not chosen: the transfer term as the mean of kappa over the k + 1 slots of N(t)."""
    transfer = picker.neighbours.weight.mean(axis=1, dtype=np.float64)
    gains = (1.0 - picker.surrogate(context.parent_scores)) * picker.decay(context) * transfer
    eligible = ~(context.parent_scores >= SOLVED)
    logits = np.where(eligible, gains / picker.temperature, -np.inf)
    weights = np.exp(logits - logits[eligible].max())
    return weights / weights.sum()


def top5(p: np.ndarray) -> set[int]:
    return set(np.argsort(-p, kind="stable")[:5].tolist())


def restriction(k: int) -> None:
    print(f"## Dense kernel vs top-{k} neighbours: target distributions on the training rows")
    print(
        "| task | rows | parent scores | eligible | TV distance | top-5 overlap | TV, top-5 with N(t)-mean transfer |"
    )
    print("|---|---|---|---|---|---|---|")
    for task_name in TASKS:
        ids, texts = train_texts(task_name)
        kappa = text_kernel(texts)
        sparse = InfoGainTargets(build_neighbours(texts, k))
        for label, scores in score_vectors(task_name, ids).items():
            context = TargetingContext(ids, scores, scores >= SOLVED, {})
            p_dense = dense_probabilities(kappa, context)
            p_sparse = sparse.probabilities(context)
            p_local = neighbourhood_mean_probabilities(sparse, context)
            tv = 0.5 * float(np.abs(p_dense - p_sparse).sum())
            tv_local = 0.5 * float(np.abs(p_dense - p_local).sum())
            eligible = int((~(scores >= SOLVED)).sum())
            overlap = len(top5(p_dense) & top5(p_sparse))
            overlap_local = len(top5(p_dense) & top5(p_local))
            print(
                f"| {task_name} | {len(ids)} | {label} | {eligible} | {tv:.3f} | {overlap}/5 "
                f"| {tv_local:.3f}, {overlap_local}/5 |"
            )
    print()


def lockpicking_codes(count: int, seed: int = 7) -> list[str]:
    """Codes drawn as scripts/make_lockpicking6.py draws them (in-set digit with probability 0.85), vectorised."""
    rng = np.random.default_rng(seed)
    digits = np.empty((count, len(CANDIDATES)), dtype=np.uint8)
    for position, candidates in enumerate(CANDIDATES):
        inside = np.array(sorted(candidates))
        outside = np.array(sorted(set(range(10)) - candidates))
        pick_inside = rng.random(count) < IN_SET_PROBABILITY
        digits[:, position] = np.where(
            pick_inside,
            inside[rng.integers(len(inside), size=count)],
            outside[rng.integers(len(outside), size=count)],
        )
    flat = (digits + ord("0")).tobytes().decode()
    width = len(CANDIDATES)
    return [flat[i : i + width] for i in range(0, len(flat), width)]


def recall(k: int) -> None:
    from coco_sql.tasks import load_task

    goemotions = load_task("goemotions")
    sets = {
        "5,000 lockpicking codes": lockpicking_codes(5_000),
        "1,500 goemotions texts (all splits)": [
            str(t) for s in ("train", "val", "test") for t in goemotions.split(s).inputs["text"]
        ],
    }
    print(f"## LSH forest vs exact top-{k} (forced: exact_below=0)")
    print("| texts | exact s | LSH s | kappa mass found | kappa^4 mass found | nearest row found |")
    print("|---|---|---|---|---|---|")
    for label, texts in sets.items():
        started = time.perf_counter()
        exact = build_neighbours(texts, k, exact_below=len(texts) + 1).weight[:, 1:]
        exact_s = time.perf_counter() - started
        started = time.perf_counter()
        lsh = build_neighbours(texts, k, exact_below=0).weight[:, 1:]
        lsh_s = time.perf_counter() - started
        mass = lsh.sum() / exact.sum()
        mass4 = (lsh.astype(float) ** 4).sum() / (exact.astype(float) ** 4).sum()
        nearest = float(np.mean(np.abs(lsh[:, 0] - exact[:, 0]) < 1e-6))
        print(f"| {label} | {exact_s:.2f} | {lsh_s:.2f} | {mass:.3f} | {mass4:.3f} | {nearest:.3f} |")
    print()


CHILD = """
import json, resource, sys, time
import numpy as np
sys.path.insert(0, {bench!r})
from bench_infogain import lockpicking_codes
from coco_sql.search.infogain import InfoGainTargets, TargetingContext
from coco_sql.search.neighbours import build_neighbours


def peak_mb():
    # VmHWM, not ru_maxrss: after fork + exec, Linux reports the parent's peak in ru_maxrss if it was higher
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024


rows, k = {rows}, {k}
texts = lockpicking_codes(rows)
before, before_mb = resource.getrusage(resource.RUSAGE_SELF), peak_mb()
started = time.perf_counter()
neighbours = build_neighbours(texts, k)
seconds = time.perf_counter() - started
after, after_mb = resource.getrusage(resource.RUSAGE_SELF), peak_mb()
cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
picker = InfoGainTargets(neighbours)
scores = np.random.default_rng(1).integers(0, 2, rows).astype(float)
ids = tuple(str(i) for i in range(rows))
started = time.perf_counter()
picker.order(TargetingContext(ids, scores, scores >= 0.9, {{}}), np.random.default_rng(0))
order_s = time.perf_counter() - started
size = neighbours.index.nbytes + neighbours.weight.nbytes + neighbours.mean_kappa.nbytes
print(json.dumps({{"rows": rows, "seconds": seconds, "cpu": cpu, "before_mb": before_mb, "peak_mb": after_mb,
                  "result_mb": size / 2**20, "order_s": order_s}}))
"""


def cost(sizes: Sequence[int], k: int) -> None:
    print(f"## Building the top-{k} neighbours of generated lockpicking codes (one fresh process per size)")
    print(
        "| rows | build s (wall) | build s (CPU) | peak RSS MB | peak before build MB | result MB | targeting s/iteration |"
    )
    print("|---|---|---|---|---|---|---|")
    for rows in sizes:
        code = CHILD.format(bench=str(Path(__file__).resolve().parent), rows=rows, k=k)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(
                f"| {rows:,} | failed with exit code {done.returncode}: {done.stderr.strip()[-300:]} ||||||"
            )
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {rows:,} | {r['seconds']:.2f} | {r['cpu']:.2f} | {r['peak_mb']:.0f} | {r['before_mb']:.0f} "
            f"| {r['result_mb']:.0f} | {r['order_s']:.3f} |"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=tuple(SIZES), default="small")
    parser.add_argument("--k", type=int, default=32)
    args = parser.parse_args()
    restriction(args.k)
    recall(args.k)
    cost(SIZES[args.size], args.k)


if __name__ == "__main__":
    main()
