"""The scripted data agent: a model that follows the spec it is given, and nothing else. Not a language model.

`coco-sql demo-agent-server` serves it behind an OpenAI-compatible endpoint (`llm.scripted_server`), so that a
data-agent run works end to end offline, through coco-sql's real HTTP client, response cache and tool loop; the
tests run it the same way (tests/llm_double.py's `FakeEndpoint`). It answers DABStep's fee questions on the
`dabstep` pack by rules, and says so when it is asked what it is.

Each turn it reads the request: the system prompt (the rendered spec), the tools offered (names, descriptions,
parameter docs), the question, and the tool results so far. It knows the shapes of DABStep's fee questions
(`FEE_SHAPES`) and three rules, and it applies a rule only when the spec's text states it:

- ``FEE``: "fee = fixed_amount + rate * transaction_value / 10000" (manual, section 5); without it, it reads
  ``rate`` as a percentage (``/ 100``);
- ``NULL``: a null field applies to all values (manual, section 5); without it, ``is_credit = TRUE`` only;
- ``EMPTY``: an empty list applies to all values (stated nowhere in the pack's documents); without it, a rule
  must list the value.

A verified query in the spec for a question of the same shape carries its rules in SQL: the model reuses it with
this question's values. Before its query, when a free SQL tool may read the ``documents`` table, it reads the
manual's section on fees (so traces show which sections a run read), but it does not learn a rule from what it
reads: a model that follows its spec. Any other question gets a plausible wrong answer without a tool call, except
the smoke question (`smoke.SMOKE_QUESTION`), which it answers with the tool call asked for.

Everything is a pure function of the request: the same request gets the same turn.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from coco_sql.languages.agent_spec.scoring import requested_decimals
from coco_sql.languages.agent_spec.smoke import SMOKE_QUESTION, SMOKE_SQL, SMOKE_TOOL
from coco_sql.llm.scripted_server import Turn
from coco_sql.plugin_loader import DEPLOY_DIALECT

NUMBER = r"(?P<value>\d+(?:\.\d+)?)"
#: The fee questions' shapes (DABStep's templates; scripts/dabstep_questions.py maps them to reference answers).
FEE_SHAPES = {
    "credit_average_fee": rf"For credit transactions, what would be the average fee that the card scheme (?P<scheme>\w+) would charge for a transaction value of {NUMBER} EUR\?",
    "account_average_fee": rf"For account type (?P<account>[A-Z]), what would be the average fee that the card scheme (?P<scheme>\w+) would charge for a transaction value of {NUMBER} EUR\? Provide the answer in EUR and \d+ decimals\.",
    "account_mcc_average_fee": rf"For account type (?P<account>[A-Z]) and the MCC description: (?P<mcc>.+), what would be the average fee that the card scheme (?P<scheme>\w+) would charge for a transaction value of {NUMBER} EUR\? Provide the answer in EUR and \d+ decimals",
    "most_expensive_mcc": rf"What is the most expensive MCC for a transaction of {NUMBER} euros, in general\? If there are many MCCs with the same value, list all of them\. Provide a list as an output even if it is one element\.",
    "average_scenario_scheme": rf"In the average scenario, which card scheme would provide the (?P<way>cheapest|most expensive) fee for a transaction value of {NUMBER} EUR\?",
    "fee_ids_for_account_aci": r"What is the fee ID or IDs that apply to account_type = (?P<account>[A-Z]) and aci = (?P<aci>[A-Z])\?",
}
RULES = {
    "FEE": re.compile(r"fixed_amount \+ rate \* transaction_value / 10000"),
    "NULL": re.compile(r"null.{0,80}appl(?:y|ies) to all"),
    "EMPTY": re.compile(r"empty list.{0,160}(?:all|any) (?:possible )?values?"),
}
NEEDS = {
    "credit_average_fee": ("FEE", "NULL"),
    "account_average_fee": ("FEE", "EMPTY"),
    "account_mcc_average_fee": ("FEE", "EMPTY"),
    "most_expensive_mcc": ("FEE", "EMPTY"),
    "average_scenario_scheme": ("FEE",),
    "fee_ids_for_account_aci": ("EMPTY",),
}
TABLES = {
    "credit_average_fee": {"fees"},
    "account_average_fee": {"fees", "fee_account_types"},
    "account_mcc_average_fee": {"fees", "fee_account_types", "fee_mccs", "merchant_category_codes"},
    "most_expensive_mcc": {"fees", "fee_mccs"},
    "average_scenario_scheme": {"fees"},
    "fee_ids_for_account_aci": {"fees", "fee_account_types", "fee_acis"},
}
MANUAL_LOOKUP = (
    "SELECT section, title, text FROM documents WHERE text ILIKE '%fixed_amount%' ORDER BY section"
)
GIVE_UP = "I could not work that out from the data."


def knowledge(messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]) -> str:
    """The spec as the model reads it: the system prompt, each tool's description and parameter docs."""
    texts = [m["content"] for m in messages if m["role"] == "system"]
    for tool in tools:
        texts.append(tool.get("description") or "")
        for parameter in ((tool.get("parameters") or {}).get("properties") or {}).values():
            texts.append(parameter.get("description") or "")
    return " ".join(" ".join(texts).lower().split())


def rules_in(text: str) -> frozenset[str]:
    return frozenset(name for name, pattern in RULES.items() if pattern.search(text))


class DataAgentModel:
    """The script for `FakeEndpoint(script=DataAgentModel(), full_tools=True)`. `turns` counts the turns it gave."""

    def __init__(self) -> None:
        self.turns = 0

    def __call__(self, messages: list[dict[str, Any]], tools: list[Any]) -> Turn:
        self.turns += 1
        user = next(m["content"] for m in messages if m["role"] == "user")
        if user == SMOKE_QUESTION:  # can it call a tool? (`smoke.check_tool_calling`)
            offered = {t["name"] if isinstance(t, dict) else t for t in tools}
            return (
                Turn("", ((SMOKE_TOOL.name, {"sql": SMOKE_SQL}),))
                if SMOKE_TOOL.name in offered
                else Turn("42")
            )
        question, _, guidelines = user.partition("\n\nGuidelines: ")
        template, groups = _shape(question)
        results = [m["content"] for m in messages if m["role"] == "tool"]
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        tool = _sql_tool(system, tools, TABLES.get(template or "", set()))
        if template not in NEEDS or tool is None:
            return Turn(GIVE_UP)
        plan = ([MANUAL_LOOKUP] if "documents" in tool[1] else []) + [
            self.query(template, groups, system, tools)
        ]
        if len(results) < len(plan):
            return Turn("", ((tool[0], {"sql": plan[len(results)]}),))
        return Turn(_answer(template, json.loads(results[-1]), requested_decimals(guidelines)))

    def query(self, template: str, groups: Mapping[str, str], system: str, tools: Sequence[Any]) -> str:
        reused = _verified(template, groups, system)
        if reused is not None:
            return reused
        return _sql(template, groups, rules_in(knowledge([{"role": "system", "content": system}], tools)))


def _shape(question: str) -> tuple[str | None, dict[str, str]]:
    for name, pattern in FEE_SHAPES.items():
        found = re.fullmatch(pattern, question.strip())
        if found:
            return name, found.groupdict()
    return None, {}


def _sql_tool(system: str, tools: Sequence[Any], needed: set[str]) -> tuple[str, set[str]] | None:
    """The first free SQL tool (listed under '# Tables' in the prompt) that may read every `needed` table."""
    for block in re.findall(r"^(\w+) runs one read-only .*?:\n((?:- .*\n?)*)", system, flags=re.MULTILINE):
        name, lines = block
        readable = set(re.findall(r"^- (\w+)\(", lines, flags=re.MULTILINE))
        offered = {t["name"] if isinstance(t, dict) else t for t in tools}
        if name in offered and needed <= readable:
            return name, readable
    return None


def _fee(value: str, rules: frozenset[str], alias: str = "f") -> str:
    scale = "10000.0" if "FEE" in rules else "100.0"
    return f"{alias}.fixed_amount + {alias}.rate * {value} / {scale}"


def _listed(table: str, column: str, value: str, rules: frozenset[str]) -> str:
    listed = f"EXISTS (SELECT 1 FROM {table} t WHERE t.fee_id = f.id AND t.{column} = {value})"
    if "EMPTY" in rules:
        return f"(NOT EXISTS (SELECT 1 FROM {table} t WHERE t.fee_id = f.id) OR {listed})"
    return listed


def _sql(template: str, g: Mapping[str, str], rules: frozenset[str]) -> str:
    """This question's query, as the rules the spec states let the model write it."""
    credit = "(f.is_credit OR f.is_credit IS NULL)" if "NULL" in rules else "f.is_credit = TRUE"
    scheme = f"f.card_scheme = '{g.get('scheme', '')}'"
    if template == "credit_average_fee":
        return f"SELECT AVG({_fee(g['value'], rules)}) AS fee FROM fees f WHERE {scheme} AND {credit}"
    if template in ("account_average_fee", "account_mcc_average_fee"):
        where = [scheme, _listed("fee_account_types", "account_type", f"'{g['account']}'", rules)]
        if template == "account_mcc_average_fee":
            description = g["mcc"].replace("'", "''")
            code = f"(SELECT mcc FROM merchant_category_codes WHERE description = '{description}')"
            where.append(_listed("fee_mccs", "mcc", code, rules))
        return f"SELECT AVG({_fee(g['value'], rules)}) AS fee FROM fees f WHERE {' AND '.join(where)}"
    if template == "fee_ids_for_account_aci":
        account = _listed("fee_account_types", "account_type", f"'{g['account']}'", rules)
        aci = _listed("fee_acis", "aci", f"'{g['aci']}'", rules)
        return f"SELECT LISTAGG(f.id, ', ') WITHIN GROUP (ORDER BY f.id) AS ids FROM fees f WHERE {account} AND {aci}"
    if template == "average_scenario_scheme":
        order = "ASC" if g["way"] == "cheapest" else "DESC"
        return (f"SELECT f.card_scheme, AVG({_fee(g['value'], rules)}) AS fee FROM fees f "
                f"GROUP BY f.card_scheme ORDER BY fee {order}, f.card_scheme")  # fmt: skip
    applies = _listed("fee_mccs", "mcc", "c.mcc", rules)
    return (f"WITH codes AS (SELECT DISTINCT mcc FROM fee_mccs), means AS (SELECT c.mcc, "
            f"AVG({_fee(g['value'], rules)}) AS fee FROM codes c JOIN fees f ON {applies} GROUP BY c.mcc) "
            f"SELECT mcc, fee FROM means ORDER BY fee DESC, mcc")  # fmt: skip


def _verified(template: str, groups: Mapping[str, str], system: str) -> str | None:
    """A verified query of the spec for a question of the same shape, with this question's values put in place of
    that question's (literal for literal)."""
    for question, sql in re.findall(
        r"^Question: (.*)\nSQL:\n(.*?)(?=\n#|\Z)", system, flags=re.MULTILINE | re.DOTALL
    ):
        other, old = _shape(question)
        if other != template:
            continue
        swap = {old[k]: groups[k] for k in old if old[k] != groups[k]}

        def put(node: exp.Expression, swap: Mapping[str, str] = swap) -> exp.Expression:
            if isinstance(node, exp.Literal) and node.this in swap:
                new = swap[node.this]
                return exp.Literal.string(new) if node.is_string else exp.Literal.number(new)
            return node

        return sqlglot.parse_one(sql, read=DEPLOY_DIALECT).transform(put).sql(dialect=DEPLOY_DIALECT)
    return None


def _answer(template: str, result: Mapping[str, Any], decimals: int | None) -> str:
    rows = result.get("rows") or []
    if "error" in result or not rows:
        return GIVE_UP
    places = decimals if decimals is not None else 6
    if template == "fee_ids_for_account_aci":
        return str(rows[0][0] or "")
    if template == "average_scenario_scheme":
        return str(rows[0][0])
    if template == "most_expensive_mcc":
        top = rows[0][1]
        return ", ".join(str(row[0]) for row in rows if abs(row[1] - top) < 1e-9)
    value = rows[0][0]
    return GIVE_UP if value is None else f"{value:.{places}f}"
