"""Behaviour descriptors of a SQL program: the MAP-Elites grid is complexity x branching.

Complexity is the size of the parsed AST; branching counts the places a program makes a decision or a model
call (CASE branches, CTEs, AI function calls). Both are bucketed so that small edits usually stay in the same
cell and structural growth moves to a new one, which keeps alternative structures alive in the archive.
"""

from __future__ import annotations

from sqlglot import exp

N_BINS = 10
NODES_PER_BIN = 50
BRANCHES_PER_BIN = 4


def cell_of(query: exp.Expression) -> str:
    nodes = sum(1 for _ in query.walk())
    branches = (
        sum(len(case.args.get("ifs") or []) for case in query.find_all(exp.Case))
        + sum(1 for _ in query.find_all(exp.CTE))
        + sum(1 for f in query.find_all(exp.Func) if _is_ai_call(f))
    )
    return f"{min(N_BINS - 1, nodes // NODES_PER_BIN)}:{min(N_BINS - 1, branches // BRANCHES_PER_BIN)}"


def _is_ai_call(node: exp.Func) -> bool:
    name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
    return name.upper().startswith("AI_")
