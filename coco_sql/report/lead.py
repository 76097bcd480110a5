"""The top of the report, for an analyst (issue 40): what changed from the seed, on how many rows it is now right,
what it costs per 1,000 rows in tokens and in dollars, and how to deploy it. Pure functions over plain data.

    right      a row whose score is 1 (to 1e-9): the exact label, every label of a multi-label row, every
               compared column of a dbt row. A task with no such row (scores that are ratios, such as a tour's
               length against a bound) shows the mean score instead.
    dollars    at the run's own prices when every model that spent tokens has one (`--price`); otherwise at
               `DEFAULT_USD_PER_MILLION_TOKENS`, input and output alike, said next to the number: a round
               figure to compare programs by, not a provider's price list.
    deploy     the kind's export form that runs where the program will: a Snowflake view for a SQL program in
               Snowflake's dialect (a DuckDB view in DuckDB's), a dbt project, a Cortex agent; else the program as
               evolved.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT

DEFAULT_USD_PER_MILLION_TOKENS = 1.00
RIGHT = 1.0 - 1e-9
STEPS_SHOWN = 3
DEPLOY_FORMS = {DEPLOY_DIALECT: ("snowflake_view", "dbt_project", "cortex_agent"),
                SANDBOX_DIALECT: ("duckdb_view", "dbt_project", "cortex_agent")}  # fmt: skip
FOLDER_FORMS = ("dbt_project", "cortex_agent")  # written as a folder: --out


def changes(lineage: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The champion's steps away from the seed: how many, and the `STEPS_SHOWN` that gained most."""
    steps = [s for s in lineage if s["parent"] is not None]
    biggest = sorted(steps, key=lambda s: -(s["delta"] or 0.0))[:STEPS_SHOWN]
    return {
        "steps": len(steps),
        "biggest": [
            {
                "program_id": s["program"]["program_id"],
                "approach": s["program"]["approach"] or "",
                "delta": s["delta"],
            }
            for s in sorted(biggest, key=lambda s: s["program"]["iteration"])
        ],
    }


def right_rows(
    seed: Sequence[Mapping[str, Any]], champion: Sequence[Mapping[str, Any]]
) -> dict[str, Any] | None:
    """On how many of a split's rows the seed and the champion are right (or their mean scores); None without
    rows."""
    if not champion:
        return None
    n = len(champion)
    exact = any(r["score"] is not None and r["score"] >= RIGHT for r in [*seed, *champion])
    if exact:
        return {"rows": n, "exact": True, "seed": _right(seed), "champion": _right(champion)}
    return {"rows": n, "exact": False, "seed": _mean(seed), "champion": _mean(champion)}


def _right(rows: Sequence[Mapping[str, Any]]) -> int | None:
    return sum(1 for r in rows if (r["score"] or 0.0) >= RIGHT) if rows else None


def _mean(rows: Sequence[Mapping[str, Any]]) -> float | None:
    return sum(r["score"] or 0.0 for r in rows) / len(rows) if rows else None


def cost(deploy: Mapping[str, Any] | None) -> dict[str, Any]:
    """The champion's deploy cost per 1,000 rows: whole tokens, and dollars at the run's prices or the default."""
    if not deploy:
        return {"tokens": 0, "calls": 0, "usd": 0.0, "priced": True}
    tokens = round(deploy["input_tokens_per_1000_rows"] + deploy["output_tokens_per_1000_rows"])
    usd = deploy.get("usd_per_1000_rows")
    priced = usd is not None
    if not priced:
        usd = tokens * DEFAULT_USD_PER_MILLION_TOKENS / 1e6
    return {"tokens": tokens, "calls": round(deploy["calls_per_1000_rows"]), "usd": usd, "priced": priced,
            "default_price": DEFAULT_USD_PER_MILLION_TOKENS}  # fmt: skip


def deploy_form(forms: Sequence[str], dialect: str | None) -> dict[str, Any]:
    """The export form to deploy with, and whether it is written as a folder."""
    for form in DEPLOY_FORMS.get(dialect or DEPLOY_DIALECT, DEPLOY_FORMS[DEPLOY_DIALECT]):
        if form in forms:
            return {"form": form, "folder": form in FOLDER_FORMS}
    return {"form": "sql", "folder": False}


def usd(amount: float) -> str:
    """Dollars for people: two significant digits below a cent, cents above."""
    if amount == 0:
        return "$0"
    if amount < 0.01:
        return f"${amount:.2g}" if amount >= 1e-4 else "under $0.0001"
    return f"${amount:,.2f}"
