"""The DABStep pack (tasks/dabstep/) and its reference implementation (scripts/dabstep_reference.py,
scripts/dabstep_questions.py), on the real
files and a real DuckDB.

The expected answers below are public: DABStep's dev set (data/tasks/dev.jsonl of adyen/DABstep, CC BY 4.0) and, for
the disagreements the pack's README documents, answers published by the leaderboard (a submission scored 100 %,
collected in validation_index.jsonl of github.com/VeigaPunk/dabstep-fee-engine at 3c165fb). Tests are not shown to
the search.
"""

from __future__ import annotations

import csv
import dataclasses
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import pytest

from coco_sql.languages.agent_spec.scoring import score
from tests.dabstep_scripts import ref, shapes

REPO = Path(__file__).resolve().parents[1]
PACK = REPO / "tasks" / "dabstep"
AGENTIFY = os.environ.get("DABSTEP_AGENTIFY_GIT")  # the agentify-dabench snapshot (README, "Rebuilding")


NA = "If a question does not have a relevant or applicable answer for the task, please respond with 'Not Applicable'"
SIX = f"Answer must be just a number expressed in EUR rounded to 6 decimals. {NA}"
LIST = f"Answer must be a list of values in comma separated list, eg: A, B, C. If the answer is an empty list, reply with an empty string. {NA}"
DEV_1464_ANSWER = (
    "1, 2, 5, 6, 8, 9, 10, 12, 14, 15, 20, 21, 22, 23, 25, 30, 34, 35, 36, 39, 45, 48, 49, 50, 51, 55, "
    "56, 57, 58, 62, 65, 68, 69, 71, 78, 82, 83, 86, 87, 89, 90, 91, 95, 96, 98, 100, 101, 103, 107, 108,"
    " 110, 112, 113, 114, 115, 116, 119, 122, 127, 129, 132, 133, 134, 138, 139, 143, 146, 147, 150, 152,"
    " 154, 155, 157, 158, 160, 161, 165, 166, 171, 174, 176, 178, 180, 184, 187, 190, 191, 195, 197, 199,"
    " 202, 205, 213, 214, 215, 219, 220, 223, 226, 227, 229, 231, 234, 235, 236, 239, 240, 244, 250, 251,"
    " 256, 262, 263, 265, 272, 273, 274, 276, 278, 282, 283, 285, 286, 289, 290, 293, 296, 302, 303, 304,"
    " 306, 307, 309, 310, 314, 317, 320, 322, 328, 329, 332, 338, 341, 344, 345, 346, 349, 351, 352, 355,"
    " 360, 362, 364, 365, 366, 367, 368, 369, 372, 375, 379, 384, 390, 391, 392, 393, 394, 395, 397, 398,"
    " 401, 402, 404, 405, 406, 407, 410, 419, 421, 426, 430, 431, 432, 433, 434, 440, 442, 443, 445, 446,"
    " 447, 449, 451, 453, 454, 457, 461, 463, 471, 474, 475, 477, 480, 482, 483, 487, 490, 491, 497, 503,"
    " 504, 505, 506, 507, 508, 509, 511, 512, 518, 521, 523, 524, 527, 533, 537, 539, 545, 547, 549, 550,"
    " 552, 555, 556, 558, 560, 563, 564, 565, 568, 570, 571, 573, 574, 575, 576, 583, 584, 587, 589, 590,"
    " 591, 592, 594, 597, 600, 601, 602, 603, 609, 610, 611, 613, 615, 618, 619, 621, 622, 626, 629, 630,"
    " 636, 638, 640, 644, 645, 651, 654, 661, 666, 667, 669, 675, 679, 682, 683, 684, 685, 689, 692, 694,"
    " 695, 697, 698, 707, 708, 709, 710, 711, 713, 716, 717, 718, 722, 723, 725, 729, 731, 734, 735, 736,"
    " 739, 740, 743, 746, 749, 750, 754, 755, 757, 759, 767, 769, 772, 775, 776, 778, 779, 785, 786, 792,"
    " 793, 796, 797, 799, 800, 804, 805, 806, 812, 813, 817, 818, 820, 823, 826, 827, 828, 831, 832, 835,"
    " 837, 839, 842, 844, 855, 856, 857, 858, 862, 864, 865, 866, 867, 869, 871, 874, 875, 876, 883, 889,"
    " 891, 893, 895, 897, 898, 901, 903, 910, 913, 915, 918, 919, 920, 927, 929, 930, 931, 938, 939, 940,"
    " 942, 943, 950, 952, 953, 956, 960, 961, 964, 967, 968, 970, 973, 974, 975, 978, 979, 981, 986, 989,"
    " 990, 991, 992, 998, 999, 1000"
)

# task id -> (question, guidelines, DABStep's answer); all 10 dev questions
DEV = {
    "5": (
        "Which issuing country has the highest number of transactions?",
        f"Answer must be just the country code. {NA}",
        "NL",
    ),
    "49": (
        "What is the top country (ip_country) for fraud? A. NL, B. BE, C. ES, D. FR",
        f"Answer must be in the form 'X. Y' where X is the option's letter chosen and Y is the option's country code. {NA}",
        "B. BE",
    ),
    "70": (
        "Is Martinis_Fine_Steakhouse in danger of getting a high-fraud rate fine?",
        f"Answer must be just either yes or no. {NA}",
        "Not Applicable",
    ),
    "1273": (
        "For credit transactions, what would be the average fee that the card scheme GlobalCard would charge for a transaction value of 10 EUR?",
        SIX,
        "0.120132",
    ),
    "1305": (
        "For account type H and the MCC description: Eating Places and Restaurants, what would be the average fee that the card scheme GlobalCard would charge for a transaction value of 10 EUR? Provide the answer in EUR and 6 decimals",
        SIX,
        "0.123217",
    ),
    "1464": ("What is the fee ID or IDs that apply to account_type = R and aci = B?", LIST, DEV_1464_ANSWER),
    "1681": (
        "For the 10th of the year 2023, what are the Fee IDs applicable to Belles_cookbook_store?",
        LIST,
        "741, 709, 454, 813, 381, 536, 473, 572, 477, 286",
    ),
    "1753": (
        "What are the applicable fee IDs for Belles_cookbook_store in March 2023?",
        LIST,
        "384, 394, 276, 150, 536, 286, 163, 36, 680, 939, 428, 813, 556, 51, 53, 572, 960, 64, 709, 454, 595, 725, 473, 347, 477, 608, 868, 741, 231, 107, 626, 249, 123, 381",
    ),
    "1871": (
        "In January 2023 what delta would Belles_cookbook_store pay if the relative fee of the fee with ID=384 changed to 1?",
        f"Answer must be just a number rounded to 14 decimals. {NA}",
        "-0.94000000000005",
    ),
    "2697": (
        "For Belles_cookbook_store in January, if we were to move the fraudulent transactions towards a different Authorization Characteristics Indicator (ACI) by incentivizing users to use a different interaction, what would be the preferred choice considering the lowest possible fees?",
        f"Answer must be just the selected ACI to incentive and the associated cost rounded to 2 decimals in this format: {{card_scheme}}:{{fee}}. {NA}",
        "E:13.57",
    ),
}
COVERED = {
    "70": "manual_absent_concept",
    "1273": "credit_average_fee",
    "1305": "account_mcc_average_fee",
    "1464": "fee_ids_for_account_aci",
}

# "For a credit transaction of <value> euros on <scheme>, what would be the most expensive ACI?": task -> published
PUBLISHED_ACI = {
    1443: ("GlobalCard", 1, "C"),
    1444: ("NexPay", 1, "C"),
    1445: ("SwiftCharge", 1, "C"),
    1446: ("TransactPlus", 1, "B"),
    1447: ("GlobalCard", 10, "C"),
    1448: ("NexPay", 10, "C"),
    1449: ("SwiftCharge", 10, "C"),
    1450: ("TransactPlus", 10, "B"),
    1451: ("GlobalCard", 100, "B"),
    1452: ("NexPay", 100, "C"),
    1453: ("SwiftCharge", 100, "C"),
    1454: ("TransactPlus", 100, "B"),
    1455: ("GlobalCard", 1000, "B"),
    1456: ("NexPay", 1000, "C"),
    1457: ("SwiftCharge", 1000, "C"),
    1458: ("TransactPlus", 1000, "B"),
    1459: ("GlobalCard", 10000, "B"),
    1460: ("NexPay", 10000, "C"),
    1461: ("SwiftCharge", 10000, "C"),
    1462: ("TransactPlus", 10000, "B"),
}
ACI_QUESTION = (
    "For a credit transaction of {value} euros on {scheme}, what would be the most expensive Authorization Characteristics "
    "Indicator (ACI)? In the case of a draw between multiple ACIs, return the ACI with the lowest alphabetical order. "
    "Provide the response in a list even if there is only one value."
)
TABLES = {
    "fees": 1000,
    "fee_account_types": 507,
    "fee_acis": 1368,
    "fee_mccs": 6842,
    "merchants": 30,
    "merchant_acquirers": 49,
    "merchant_category_codes": 769,
    "acquirer_countries": 8,
    "questions": 119,
}


@pytest.fixture(scope="module")
def pack():
    return ref.load_pack(PACK)


@pytest.fixture(scope="module")
def questions() -> list[dict[str, str]]:
    with (PACK / "data" / "questions.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("task_id", sorted(DEV, key=int))
def test_the_reference_reproduces_every_dev_answer_it_covers(pack, task_id: str) -> None:
    question, guidelines, expected = DEV[task_id]
    found = shapes.reference_answer(pack, question, guidelines)
    if task_id in COVERED:
        assert found == (COVERED[task_id], expected)  # the published text itself, not only a match
        assert score(found[1], expected, guidelines) == 1.0
    else:
        assert found is None
        assert shapes.classify(question) == (None, shapes.NEEDS_PAYMENTS)


def test_the_covered_dev_questions_are_in_the_pack_with_the_dev_answers(questions) -> None:
    rows = {row["id"]: row for row in questions}
    for task_id, template in COVERED.items():
        assert (rows[task_id]["template"], rows[task_id]["answer"]) == (template, DEV[task_id][2])
    assert not set(DEV) - set(COVERED) & set(rows)  # no uncovered dev question slipped in


def test_the_pack_files_load_in_duckdb_and_stay_small() -> None:
    con = duckdb.connect()
    for table, rows in TABLES.items():
        con.execute(
            f"CREATE TABLE {table} AS SELECT * FROM read_csv('{PACK / 'data' / table}.csv', header = true)"
        )
        assert con.execute(f"SELECT count(*) FROM {table}").fetchone() == (rows,), table
    types = dict(
        con.execute(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'fees'"
        ).fetchall()
    )
    assert (types["is_credit"], types["intracountry"], types["rate"], types["fixed_amount"]) == (
        "BOOLEAN",
        "BOOLEAN",
        "BIGINT",
        "DOUBLE",
    )
    assert con.execute("SELECT typeof(mcc) FROM merchant_category_codes LIMIT 1").fetchone() == ("BIGINT",)
    files = [path for path in PACK.rglob("*") if path.is_file()]
    assert {p.name for p in files} >= {
        "README.md",
        "SOURCE.md",
        "manual.md",
        "payments-readme.md",
        "tables.md",
    }
    assert max(path.stat().st_size for path in files) < 1_000_000


@pytest.mark.parametrize(
    ("parent", "column", "child", "value"),
    [
        ("fees", "aci", "fee_acis", "aci"),
        ("fees", "account_type", "fee_account_types", "account_type"),
        ("fees", "merchant_category_code", "fee_mccs", "mcc"),
        ("merchants", "acquirer", "merchant_acquirers", "acquirer"),
    ],
)
def test_the_json_list_columns_and_the_child_tables_hold_the_same_pairs(parent, column, child, value) -> None:
    data = PACK / "data"
    key = "merchant" if parent == "merchants" else "id"
    child_key = "merchant" if parent == "merchants" else "fee_id"
    from_json = duckdb.sql(
        f"SELECT {key}::VARCHAR, unnest(CAST({column} AS JSON)::VARCHAR[]) FROM read_csv('{data / parent}.csv')"
    ).fetchall()
    from_child = duckdb.sql(
        f"SELECT {child_key}::VARCHAR, {value}::VARCHAR FROM read_csv('{data / child}.csv')"
    ).fetchall()
    assert sorted(from_json) == sorted(from_child) and from_child


def test_every_question_has_an_answer_and_a_known_template(questions) -> None:
    assert len(questions) == TABLES["questions"] == len({row["id"] for row in questions})
    assert all(row["answer"].strip() for row in questions)
    assert {row["level"] for row in questions} == {"easy", "hard"}
    assert {row["template"] for row in questions} == {template.name for template in shapes.TEMPLATES}


def test_questions_csv_holds_what_the_reference_computes_on_the_pack(pack, questions) -> None:
    for row in questions:
        assert shapes.reference_answer(pack, row["question"], row["guidelines"]) == (
            row["template"],
            row["answer"],
        ), row["id"]


def test_the_readme_counts_are_the_pack_counts(questions) -> None:
    table = re.findall(
        r"^\| `(\w+)` \| (easy|hard) \| (\d+) \|", (PACK / "README.md").read_text(), flags=re.MULTILINE
    )
    assert {(name, level): int(n) for name, level, n in table} == Counter(
        (r["template"], r["level"]) for r in questions
    )


def test_documented_disagreement_the_most_expensive_aci_is_left_out(pack) -> None:
    """The manual's reading agrees with none of the 20 published answers; summing the fees of the rules whose
    is_credit is exactly true reproduces all 20 (README, "Known disagreements")."""
    acis = ref.manual_table(pack.manual, "aci")

    def summed(scheme: str, value: float) -> str:
        rules = [r for r in pack.fees if r.card_scheme == scheme and r.is_credit is True]
        totals = {aci: sum(ref.fee(r, value) for r in rules if ref.applies(r.aci, aci)) for aci in acis}
        return min(aci for aci in acis if totals[aci] == max(totals.values()))

    manual = {
        task: ref.most_expensive_aci(pack, scheme, value) == want
        for task, (scheme, value, want) in PUBLISHED_ACI.items()
    }
    assert sum(manual.values()) == 0
    assert all(summed(scheme, value) == want for scheme, value, want in PUBLISHED_ACI.values())
    for scheme, value, _ in PUBLISHED_ACI.values():
        template, reason = shapes.classify(ACI_QUESTION.format(value=value, scheme=scheme))
        assert template is None and reason.startswith("most_expensive_aci:")


def test_the_manual_guards_refuse_a_manual_that_changed(pack) -> None:
    priced = dataclasses.replace(pack, manual=pack.manual + "\nA retry fee of EUR 0.10 applies per retry.\n")
    with pytest.raises(ValueError, match="excessive retry fee"):
        ref.absent_concept(priced.manual, "excessive retry fee")
    silent = pack.manual.replace(
        "The faster the capture to settlement happens, the more expensive it is.", ""
    )
    with pytest.raises(ValueError, match="capture_delay"):
        ref.cheaper_factors(silent, "increased")


def test_no_answer_is_written_in_the_pack_prose(questions) -> None:
    prose = "\n".join((PACK / name).read_text() for name in ("README.md", "SOURCE.md", "docs/tables.md"))
    columns = set()
    for path in (PACK / "data").glob("*.csv"):
        columns |= set(path.read_text().splitlines()[0].split(","))
    for row in questions:
        answer = row["answer"]
        if answer == ref.NOT_APPLICABLE or len(answer) < 3 or set(answer.split(", ")) <= columns:
            continue  # 'Not Applicable', one-letter codes and column names are vocabulary, not leaked answers
        assert not re.search(rf"(?<![\w.]){re.escape(answer)}(?![\w.])", prose), row["id"]


@pytest.mark.skipif(
    AGENTIFY is None, reason="DABSTEP_AGENTIFY_GIT (the agentify-dabench snapshot) is not set"
)
def test_the_build_reproduces_the_committed_pack_byte_for_byte(tmp_path: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(REPO / "scripts" / "make_dabstep.py"),
            "--agentify",
            str(AGENTIFY),
            "--out",
            str(tmp_path),
        ],
        check=True,
        capture_output=True,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    built = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert built == sorted(
        [
            *(Path("data") / f"{t}.csv" for t in TABLES),
            Path("docs/manual.md"),
            Path("docs/payments-readme.md"),
        ]
    )
    for path in built:
        assert (tmp_path / path).read_bytes() == (PACK / path).read_bytes(), path
