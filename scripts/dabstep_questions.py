"""DABStep's question shapes that the pack can answer, each mapped to the rules of scripts/dabstep_reference.py.

``TEMPLATES`` lists the shapes in the pack. Every other DABStep question needs the payments table, which is not public
(see tasks/dabstep/README.md), except the shape in ``EXCLUDED``, whose published answers contradict the manual.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dabstep_reference import (
    NOT_APPLICABLE,
    Pack,
    absent_concept,
    applies,
    average_fee,
    cheaper_factors,
    fee_ids_for,
    fraud_column,
    highest_volume_tier,
    manual_table,
    most_expensive_mccs,
    scheme_by_average_fee,
    scheme_rules,
)

from coco_sql.languages.agent_spec.demo_model import FEE_SHAPES
from coco_sql.languages.agent_spec.scoring import requested_decimals

Answer = Callable[[Pack, dict[str, str], int | None], str]


def _money(value: float | None, decimals: int | None) -> str:
    """A number at the decimals the guidelines ask for (6 when they ask none), or 'Not Applicable' for no value."""
    return NOT_APPLICABLE if value is None else f"{value:.{decimals if decimals is not None else 6}f}"


def _ids(values: Sequence[object]) -> str:
    return ", ".join(str(v) for v in values)


def _credit_average(pack: Pack, g: dict[str, str], d: int | None) -> str:
    """The scheme's rules that apply to a credit transaction: is_credit true, or null ("applies to all")."""
    rules = [r for r in scheme_rules(pack, g["scheme"]) if applies(r.is_credit, True)]
    return _money(average_fee(rules, float(g["value"])), d)


def _account_average(pack: Pack, g: dict[str, str], d: int | None) -> str:
    """The scheme's rules that apply to the account type (and to the MCC named by its description, when given)."""
    rules = [r for r in scheme_rules(pack, g["scheme"]) if applies(r.account_type, g["account"])]
    if g.get("mcc") is not None:
        code = pack.mcc_by_description[g["mcc"]]
        rules = [r for r in rules if applies(r.merchant_category_code, code)]
    return _money(average_fee(rules, float(g["value"])), d)


@dataclass(frozen=True)
class Template:
    """One question shape: a full-match pattern, the tables or documents it needs, and its reference answer."""

    name: str
    pattern: str
    needs: str
    answer: Answer


TEMPLATES = (
    Template(
        "credit_average_fee",
        FEE_SHAPES["credit_average_fee"],
        "fees",
        _credit_average,
    ),
    Template(
        "account_average_fee",
        FEE_SHAPES["account_average_fee"],
        "fees",
        _account_average,
    ),
    Template(
        "account_mcc_average_fee",
        FEE_SHAPES["account_mcc_average_fee"],
        "fees, merchant_category_codes",
        _account_average,
    ),
    Template(
        "most_expensive_mcc",
        FEE_SHAPES["most_expensive_mcc"],
        "fees",
        lambda p, g, d: _ids(most_expensive_mccs(p, float(g["value"]))),
    ),
    Template(
        "average_scenario_scheme",
        FEE_SHAPES["average_scenario_scheme"],
        "fees",
        lambda p, g, d: scheme_by_average_fee(p, float(g["value"]), g["way"] == "cheapest"),
    ),
    Template(
        "fee_ids_for_account_aci",
        FEE_SHAPES["fee_ids_for_account_aci"],
        "fees",
        lambda p, g, d: _ids(fee_ids_for(p, g["account"], g["aci"])),
    ),
    Template(
        "manual_field_values",
        r"What are the possible values for the field (?P<field>account_type|aci)\?",
        "manual",
        lambda p, g, d: _ids(manual_table(p.manual, g["field"])),
    ),
    Template(
        "manual_fee_factors",
        r"Which factors contribute to a cheaper fee rate if the factors' value is (?P<when>increased|decreased)\?",
        "manual",
        lambda p, g, d: _ids(cheaper_factors(p.manual, g["when"])),
    ),
    Template(
        "manual_fee_factors",
        r"What boolean factors contribute to a cheaper fee rate if set to (?P<when>True|False)\?",
        "manual",
        lambda p, g, d: _ids(cheaper_factors(p.manual, g["when"])),
    ),
    Template(
        "highest_volume_tier",
        r"What is the highest volume at which the fees do not become cheaper\?",
        "fees, manual",
        lambda p, g, d: highest_volume_tier(p),
    ),
    Template(
        "manual_absent_concept",
        r"How much, if exists, is the excessive retry fee\?",
        "manual",
        lambda p, g, d: absent_concept(p.manual, "excessive retry fee"),
    ),
    Template(
        "manual_absent_concept",
        r"Is (?P<merchant>\w+) in danger of getting a high-fraud rate fine\?",
        "manual",
        lambda p, g, d: absent_concept(p.manual, "high-fraud rate fine"),
    ),
    Template(
        "manual_absent_concept",
        r"Are there any merchants under the excessive fraud threshold\?",
        "manual",
        lambda p, g, d: absent_concept(p.manual, "excessive fraud threshold"),
    ),
    Template(
        "payments_readme_column",
        r"What is the name of the column that indicates fraud\?",
        "payments-readme",
        lambda p, g, d: fraud_column(p.payments_readme),
    ),
)

# Shapes the tables and the manual could answer, left out on purpose, with the reason (written to the README).
EXCLUDED = {
    "most_expensive_aci": (
        r"For a credit transaction of (?P<value>\d+) euros on (?P<scheme>\w+), what would be the most expensive Authorization Characteristics Indicator \(ACI\)\?.*",
        "the published answers contradict the manual: see most_expensive_aci and the README",
    ),
}
NEEDS_PAYMENTS = "needs the payments table (transactions), which is not public"


def classify(question: str) -> tuple[Template | None, str]:
    """The template that answers ``question``, or None and the reason it is not in the pack."""
    for template in TEMPLATES:
        if re.fullmatch(template.pattern, question):
            return template, template.name
    for name, (pattern, reason) in EXCLUDED.items():
        if re.fullmatch(pattern, question):
            return None, f"{name}: {reason}"
    return None, NEEDS_PAYMENTS


def reference_answer(pack: Pack, question: str, guidelines: str) -> tuple[str, str] | None:
    """(template name, answer formatted as the guidelines ask), or None when the pack cannot answer ``question``."""
    template, _ = classify(question)
    if template is None:
        return None
    found = re.fullmatch(template.pattern, question)
    assert found is not None
    return template.name, template.answer(pack, found.groupdict(), requested_decimals(guidelines))
