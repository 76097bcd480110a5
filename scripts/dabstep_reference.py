"""The reference implementation of the DABStep manual's rules, over the pack's own tables and documents.

Each rule below quotes the sentence of the manual (tasks/dabstep/docs/manual.md, DABStep's ``manual.md``) that it
implements. The functions read only the pack's files (``load_pack``), so the answers in
tasks/dabstep/data/questions.csv are computed from exactly what an agent is given. scripts/dabstep_questions.py maps
DABStep's question shapes to these rules; scripts/make_dabstep.py writes the pack; tests/test_dabstep_pack.py checks
both against DABStep's dev answers.
"""

from __future__ import annotations

import csv
import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

NOT_APPLICABLE = "Not Applicable"


@dataclass(frozen=True)
class FeeRule:
    """One row of fees.json. List fields are tuples; an empty tuple or None means "any value" (see ``applies``)."""

    id: int
    card_scheme: str
    account_type: tuple[str, ...]
    capture_delay: str | None
    monthly_fraud_level: str | None
    monthly_volume: str | None
    merchant_category_code: tuple[int, ...]
    is_credit: bool | None
    aci: tuple[str, ...]
    fixed_amount: float
    rate: int
    intracountry: bool | None


@dataclass(frozen=True)
class Pack:
    fees: tuple[FeeRule, ...]
    mcc_by_description: dict[str, int]
    manual: str
    payments_readme: str


def _bool(cell: str) -> bool | None:
    return {"true": True, "false": False, "": None}[cell]


def load_pack(root: Path) -> Pack:
    """The pack's tables and documents, as the agent sees them (``root`` is tasks/dabstep)."""
    with (root / "data" / "fees.csv").open(newline="") as handle:
        fees = tuple(
            FeeRule(
                id=int(row["id"]),
                card_scheme=row["card_scheme"],
                account_type=tuple(json.loads(row["account_type"])),
                capture_delay=row["capture_delay"] or None,
                monthly_fraud_level=row["monthly_fraud_level"] or None,
                monthly_volume=row["monthly_volume"] or None,
                merchant_category_code=tuple(json.loads(row["merchant_category_code"])),
                is_credit=_bool(row["is_credit"]),
                aci=tuple(json.loads(row["aci"])),
                fixed_amount=float(row["fixed_amount"]),
                rate=int(row["rate"]),
                intracountry=_bool(row["intracountry"]),
            )
            for row in csv.DictReader(handle)
        )
    with (root / "data" / "merchant_category_codes.csv").open(newline="") as handle:
        mccs = {row["description"]: int(row["mcc"]) for row in csv.DictReader(handle)}
    docs = root / "docs"
    return Pack(fees, mccs, (docs / "manual.md").read_text(), (docs / "payments-readme.md").read_text())


# ------------------------------------------------------------------------------------------------ the fee rules


def applies(condition: object, value: object) -> bool:
    """Whether a rule's condition admits ``value``.

    Manual, section 5: "If a field is set to null it means that it applies to all possible values of that field.
    E.g. null value in aci means that the rules applies for all possible values of aci." fees.json writes an unset
    list field as ``[]`` rather than null; both mean "all values" (dev task 1464 confirms it for account_type and aci).
    A list field ("account_type: list type") admits the values it lists.
    """
    if condition is None or condition == ():
        return True
    if isinstance(condition, tuple):
        return value in condition
    return condition == value


def fee(rule: FeeRule, transaction_value: float) -> float:
    """Manual, section 5: "The fee then is provided by `fee = fixed_amount + rate * transaction_value / 10000`."."""
    return rule.fixed_amount + rule.rate * transaction_value / 10000


def average_fee(rules: Sequence[FeeRule], transaction_value: float) -> float | None:
    """The mean fee over the rules that apply: what a transaction of that value costs "on average" when the
    question fixes only some of a rule's fields. None when no rule applies."""
    if not rules:
        return None
    return statistics.fmean(fee(rule, transaction_value) for rule in rules)


def scheme_rules(pack: Pack, scheme: str) -> list[FeeRule]:
    """Manual, section 5: "card_scheme: string type. name of the card scheme or network that the fee applies to"."""
    return [rule for rule in pack.fees if rule.card_scheme == scheme]


def fee_ids_for(pack: Pack, account_type: str, aci: str) -> list[int]:
    """The rules that apply to an account type and an ACI, every other field left open (``applies``)."""
    return sorted(r.id for r in pack.fees if applies(r.account_type, account_type) and applies(r.aci, aci))


def most_expensive_mccs(pack: Pack, transaction_value: float) -> list[int]:
    """The MCCs with the highest average fee, over the rules that apply to each ("list all of them" on a tie).

    The candidates are the MCCs some rule names: every other MCC is priced only by the rules that name none, so all
    of them tie, and no published answer lists them.
    """
    named = sorted({code for rule in pack.fees for code in rule.merchant_category_code})
    means = {
        code: average_fee(
            [r for r in pack.fees if applies(r.merchant_category_code, code)], transaction_value
        )
        for code in named
    }
    top = max(value for value in means.values() if value is not None)
    return [code for code, value in means.items() if value is not None and abs(value - top) < 1e-12]


def scheme_by_average_fee(pack: Pack, transaction_value: float, cheapest: bool) -> str:
    """The card scheme whose rules cost the least (or most) on average: "the average scenario" fixes no field."""
    schemes = sorted({rule.card_scheme for rule in pack.fees})
    means = {s: statistics.fmean(fee(r, transaction_value) for r in scheme_rules(pack, s)) for s in schemes}
    return unique_best(means, highest=not cheapest)


def most_expensive_aci(pack: Pack, scheme: str, transaction_value: float) -> str:
    """EXCLUDED from the pack. The manual's reading: for each ACI of section 4, the mean fee of the scheme's rules
    that apply to a credit transaction with that ACI; the highest wins, ties to the alphabetically first ACI.

    DABStep's published answers for this question shape disagree with this reading (see the pack's README)."""
    credit = [r for r in scheme_rules(pack, scheme) if applies(r.is_credit, True)]
    means = {
        aci: average_fee([r for r in credit if applies(r.aci, aci)], transaction_value)
        for aci in manual_table(pack.manual, "aci")
    }
    top = max(value for value in means.values() if value is not None)
    return min(aci for aci, value in means.items() if value is not None and abs(value - top) < 1e-12)


# ---------------------------------------------------------------------------------------------- the manual's text

MANUAL_TABLES = {"account_type": "## 2. Account Type", "aci": "## 4. Authorization Characteristics Indicator"}


@dataclass(frozen=True)
class FeeDirection:
    """A field whose value moves the fee one way, with the manual's sentence that says so."""

    field: str
    cheaper_when: str  # "increased" or "decreased" (ordered fields), "True" or "False" (boolean fields)
    quote: str


FEE_DIRECTIONS = (
    FeeDirection(
        "capture_delay",
        "increased",
        "The faster the capture to settlement happens, the more expensive it is.",
    ),
    FeeDirection(
        "monthly_fraud_level",
        "decreased",
        "Generally, the payment processors will become more expensive as fraud rate increases.",
    ),
    FeeDirection(
        "monthly_volume",
        "increased",
        "Normally merchants with higher volume are able to get cheaper fees from payments processors.",
    ),
    FeeDirection("is_credit", "False", "Typically credit transactions are more expensive (higher fee)."),
    FeeDirection(
        "intracountry",
        "True",
        "False are for international transactions where the issuer country and acquirer country are different and typically are more expensive.",
    ),
)

# Concepts a question asks about that the manual never prices or defines: DABStep answers these 'Not Applicable'
# (dev task 70). Each pattern is checked against the manual, so a manual that starts defining one stops the build.
ABSENT_CONCEPTS = {
    "excessive retry fee": r"retry fee|fee per retry|per retry",
    "high-fraud rate fine": r"\bfines?\b",
    "excessive fraud threshold": r"excessive fraud|fraud threshold",
}


def manual_table(manual: str, field: str) -> list[str]:
    """The codes in the first column of the manual's table for ``field`` (section 2 or 4), in the manual's order."""
    section = manual.split(MANUAL_TABLES[field], 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|")[1].strip() for line in section.splitlines() if line.startswith("|")]
    return [code for code in rows[2:] if code]  # rows[0] is the header, rows[1] the |---| separator


def cheaper_factors(manual: str, when: str) -> list[str]:
    """The fields whose fee falls when their value is ``when`` ("increased", "decreased", "True", "False")."""
    flat = " ".join(manual.split())
    missing = [d.field for d in FEE_DIRECTIONS if d.quote not in flat]
    if missing:
        raise ValueError(f"docs/manual.md no longer says why these fields move the fee: {missing}")
    return [d.field for d in FEE_DIRECTIONS if d.cheaper_when == when]


def highest_volume_tier(pack: Pack) -> str:
    """The top monthly_volume tier of the fee rules, beyond which no cheaper tier exists. Manual, section 5:
    "'100k-1m' is between 100.000 (100k) and 1.000.000 (1m). [...] Normally merchants with higher volume are able
    to get cheaper fees from payments processors."."""

    def lower_bound(tier: str) -> float:
        scale = {"k": 1e3, "m": 1e6}
        first = re.findall(r"(\d+)([km])", tier)[0]
        return -1.0 if tier.startswith("<") else float(first[0]) * scale[first[1]]

    return max({r.monthly_volume for r in pack.fees if r.monthly_volume}, key=lower_bound)


def absent_concept(manual: str, concept: str) -> str:
    """'Not Applicable' for a concept the manual never defines; refuses when the manual does mention it."""
    if re.search(ABSENT_CONCEPTS[concept], manual, flags=re.IGNORECASE):
        raise ValueError(f"docs/manual.md mentions {concept!r}: the question needs a real answer now")
    return NOT_APPLICABLE


def fraud_column(readme: str) -> str:
    """The one payments column whose name says fraud, from payments-readme.md ("- `name`: description")."""
    names = [name for name in re.findall(r"^\s*- `(\w+)`:", readme, flags=re.MULTILINE) if "fraud" in name]
    if len(names) != 1:
        raise ValueError(f"docs/payments-readme.md: expected one fraud column, found {names}")
    return names[0]


# ------------------------------------------------------------------------------------------------- helpers


def unique_best(scores: dict[str, float], highest: bool) -> str:
    """The key with the highest (or lowest) score; a tie would make the question ambiguous, so it is an error."""
    best = (max if highest else min)(scores.values())
    winners = [key for key, value in scores.items() if value == best]
    if len(winners) != 1:
        raise ValueError(f"tie between {winners}")
    return winners[0]
