"""Build the DABStep data-agent pack, tasks/dabstep/, from pinned public snapshots.

Inputs (read here only, at generation time; the package never reads them):

- ``--agentify`` (or the environment variable DABSTEP_AGENTIFY_GIT): the git directory of
  github.com/datalayer-challenges/agentify-dabench (a clone's ``.git`` or a bare mirror of it). Read at commit AGENTIFY_COMMIT: DABStep's ``data/context`` files (fees,
  merchants, MCCs, acquirer countries, the manual, the payments readme) and ``data/tasks/{all,dev}.jsonl``.
  ``payments.csv`` there is a Git-LFS pointer, like in every mirror found: the payments table is not available.
- ``--published`` (optional): a JSONL of answers that score 100 % on DABStep's leaderboard (``task_id``,
  ``agent_answer``), e.g. ``validation_index.jsonl`` of github.com/VeigaPunk/dabstep-fee-engine. Only used to print
  how many reference answers it agrees with; nothing of it is written.

Every input blob is checked against its sha256 (the hashes in tasks/dabstep/SOURCE.md), so a run either
reproduces the committed pack byte for byte or stops. The answers come from scripts/dabstep_questions.py and
scripts/dabstep_reference.py, computed on the pack's own files; every dev-set answer they cover must agree, or
nothing is written (the pack is built in a scratch directory and copied over only at the end).

Usage: PYTHONPATH=. python scripts/make_dabstep.py --agentify GITDIR [--published FILE] [--out DIR]
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dabstep_questions as shapes
import dabstep_reference as ref

from coco_sql.languages.agent_spec.scoring import score

REPO = Path(__file__).resolve().parents[1]
AGENTIFY_ENV = "DABSTEP_AGENTIFY_GIT"  # where the snapshot is when --agentify is not given
AGENTIFY_COMMIT = "cc5def2491272ddd8dc11bbf080441cd25d389fb"
SHA256 = {
    "data/context/acquirer_countries.csv": "6744cf1962e4b5086342821e627f4557c32f06c3c58e8b0ff3b449dcc634f37f",
    "data/context/fees.json": "9a833666ae9be5a8e756dd1fe076c72e7c502d64161315ffa8fee9e5bf2599dc",
    "data/context/manual.md": "bb7f4ca6fdc759af1f480702b3a3b12e17e9293b0d38a1dbfbbc8ffc1e572d2c",
    "data/context/merchant_category_codes.csv": "83247d79f5ddcdd180e02f184b644f4912731942a2fc58d91f2a06b911d04b41",
    "data/context/merchant_data.json": "f158e834de27ee8407e99d9c32da690357981d2770958fd302a9bb79ced83581",
    "data/context/payments-readme.md": "8754b92d0b3127856ff72266ea482995d2a1f6a34d0a12732f7c26f527f2c4a5",
    "data/tasks/all.jsonl": "d776385abe09ff89ed3263bd47c90fa0f060680c0d2ef04a83485fa4b6f2512c",
    "data/tasks/dev.jsonl": "aa5566125718bc1e827c312e72e885bb8d0050a50c7b9aaf66c50a70e2e92a63",
}
QUESTION_COLUMNS = ["id", "question", "guidelines", "level", "template", "answer"]


def blob(git_dir: Path, commit: str, path: str) -> bytes:
    """One file of a pinned commit, checked against its sha256."""
    try:
        data = subprocess.run(
            ["git", "--git-dir", str(git_dir), "show", f"{commit}:{path}"], check=True, capture_output=True
        ).stdout
    except subprocess.CalledProcessError as error:
        sys.exit(f"{git_dir}: cannot read {commit[:7]}:{path} ({error.stderr.decode().strip()})")
    if hashlib.sha256(data).hexdigest() != SHA256[path]:
        sys.exit(f"{git_dir}: {path} at {commit[:7]} is not the expected file (sha256 differs)")
    return data


def write_csv(path: Path, header: list[str], rows: list[list[object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def cell(value: object) -> object:
    """CSV text both DuckDB and Snowflake read back: empty for null, true/false, JSON for lists."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return json.dumps(value)
    return value


def write_tables(agentify: Path, out: Path) -> None:
    """data/*.csv and docs/*.md of the pack, from the pinned sources."""
    context = "data/context/"
    fees = json.loads(blob(agentify, AGENTIFY_COMMIT, context + "fees.json"))
    fee_columns = ["id", *list(fees[0])[1:]]  # ID, card_scheme, account_type, ... as in fees.json
    rows = []
    for rule in fees:
        rule = {**rule, "intracountry": None if rule["intracountry"] is None else bool(rule["intracountry"])}
        rows.append([cell(rule[key]) for key in ["ID", *fee_columns[1:]]])
    write_csv(out / "data" / "fees.csv", fee_columns, rows)
    for name, field, column in (
        ("fee_account_types", "account_type", "account_type"),
        ("fee_acis", "aci", "aci"),
        ("fee_mccs", "merchant_category_code", "mcc"),
    ):
        write_csv(
            out / "data" / f"{name}.csv", ["fee_id", column], [[r["ID"], v] for r in fees for v in r[field]]
        )

    merchants = json.loads(blob(agentify, AGENTIFY_COMMIT, context + "merchant_data.json"))
    columns = ["merchant", "capture_delay", "acquirer", "merchant_category_code", "account_type"]
    write_csv(out / "data" / "merchants.csv", columns, [[cell(m[c]) for c in columns] for m in merchants])
    write_csv(
        out / "data" / "merchant_acquirers.csv",
        ["merchant", "acquirer"],
        [[m["merchant"], a] for m in merchants for a in m["acquirer"]],
    )
    for name, columns in (
        ("merchant_category_codes", ["mcc", "description"]),
        ("acquirer_countries", ["acquirer", "country_code"]),
    ):
        text = blob(agentify, AGENTIFY_COMMIT, f"{context}{name}.csv").decode()
        source = list(
            csv.DictReader(io.StringIO(text))
        )  # the first, unnamed column is a pandas index: dropped
        if (
            name == "merchant_category_codes"
        ):  # "0742" -> 742, the integers fees.json and merchant_data.json use
            source = [{**row, "mcc": int(row["mcc"])} for row in source]
        write_csv(out / "data" / f"{name}.csv", columns, [[row[c] for c in columns] for row in source])

    for name in ("manual.md", "payments-readme.md"):
        (out / "docs").mkdir(parents=True, exist_ok=True)
        (out / "docs" / name).write_bytes(blob(agentify, AGENTIFY_COMMIT, context + name))


def questions(agentify: Path) -> tuple[list[dict[str, str]], dict[str, str]]:
    """DABStep's questions (the 450 of the default split, then the dev-only ones) and the dev set's answers."""
    default = [
        json.loads(line) for line in blob(agentify, AGENTIFY_COMMIT, "data/tasks/all.jsonl").splitlines()
    ]
    dev = [json.loads(line) for line in blob(agentify, AGENTIFY_COMMIT, "data/tasks/dev.jsonl").splitlines()]
    seen = {q["task_id"] for q in default}
    return default + [q for q in dev if q["task_id"] not in seen], {q["task_id"]: q["answer"] for q in dev}


def check_dev(rows: list[list[str]], every: list[dict[str, str]], dev_answers: dict[str, str]) -> list[str]:
    """Print each dev question's check; return the ids whose reference answer disagrees with DABStep's."""
    by_id = {row[0]: row for row in rows}
    texts = {q["task_id"]: q["question"] for q in every}
    failures = []
    print("dev-set checks:")
    for task_id, expected in dev_answers.items():
        row = by_id.get(task_id)
        if row is None:
            print(f"  {task_id}: not covered ({shapes.classify(texts[task_id])[1]})")
            continue
        agrees = score(row[5], expected, row[2]) == 1.0
        same = " (same text)" if row[5] == expected else ""
        print(f"  {task_id}: {row[4]}: {'agrees' if agrees else 'DISAGREES'}{same}")
        failures += [] if agrees else [task_id]
    return failures


def build(agentify: Path, out: Path, published: Path | None) -> None:
    """Write the pack into a scratch directory, check it, and only then copy it over ``out``."""
    with tempfile.TemporaryDirectory() as scratch:
        staged = Path(scratch)
        write_tables(agentify, staged)
        pack = ref.load_pack(staged)
        every, dev_answers = questions(agentify)
        rows, reasons = [], Counter()
        for q in every:
            found = shapes.reference_answer(pack, q["question"], q["guidelines"])
            reasons[shapes.classify(q["question"])[1] if found is None else "in the pack"] += 1
            if found is not None:
                rows.append([q["task_id"], q["question"], q["guidelines"], q["level"], *found])
        failures = check_dev(rows, every, dev_answers)
        if failures:
            sys.exit(f"the reference disagrees with dev answers {failures}: nothing written")
        rows.sort(key=lambda row: int(row[0]))
        write_csv(staged / "data" / "questions.csv", QUESTION_COLUMNS, rows)
        shutil.copytree(staged, out, dirs_exist_ok=True)
    print(f"wrote {out} ({len(rows)} questions)")
    for (template, level), count in sorted(Counter((row[4], row[3]) for row in rows).items()):
        print(f"  {template:26} {level:5} {count}")
    print("left out:", dict(reasons))
    if published is not None:
        compare_published(pack, every, rows, published)


def compare_published(pack: ref.Pack, every: list[dict[str, str]], rows: list[list[str]], path: Path) -> None:
    """How many pack answers a 100 %-scoring published submission agrees with, per template (scored like DABStep)."""
    answers = {r["task_id"]: r["agent_answer"] for r in map(json.loads, path.read_text().splitlines())}
    agree, total, differ = Counter(), Counter(), []
    for task_id, _, guidelines, _, template, ours in rows:
        if task_id in answers:
            total[template] += 1
            ok = score(answers[task_id], ours, guidelines) == 1.0
            agree[template] += ok
            differ += [] if ok else [task_id]
    print(
        "published answers vs reference:",
        {t: f"{agree[t]}/{total[t]}" for t in sorted(total)},
        "differ:",
        differ,
    )
    pattern = shapes.EXCLUDED["most_expensive_aci"][0]
    hits = [(q["task_id"], re.fullmatch(pattern, q["question"])) for q in every]
    hits = [(t, m) for t, m in hits if m and t in answers]
    same = sum(
        score(answers[t], ref.most_expensive_aci(pack, m["scheme"], float(m["value"])), None) == 1.0
        for t, m in hits
    )
    print(f"most_expensive_aci, the manual's reading vs published: {same}/{len(hits)} agree")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agentify", type=Path, default=os.environ.get(AGENTIFY_ENV))
    parser.add_argument("--published", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=REPO / "tasks" / "dabstep")
    args = parser.parse_args()
    if args.agentify is None:
        parser.error(f"give --agentify GITDIR (or set {AGENTIFY_ENV}): the agentify-dabench snapshot")
    build(Path(args.agentify), args.out, args.published)


if __name__ == "__main__":
    main()
