"""Behaviour descriptors: the MAP-Elites grid is complexity x branching, for programs of any language.

Complexity is the size of the program's AST; branching counts the places it makes a decision or a model call
(SQL: CASE branches, CTEs, AI calls; Python: if/while/for, comprehensions, functions). Each language counts them
on its own tree (`languages.*.cell`); both are bucketed here, so that small edits usually stay in the same cell
and structural growth moves to a new one, which keeps alternative structures alive in the archive.
"""

from __future__ import annotations

N_BINS = 10
NODES_PER_BIN = 50
BRANCHES_PER_BIN = 4


def cell_of_counts(nodes: int, branches: int) -> str:
    """'size bin:branching bin' of an AST with `nodes` nodes and `branches` decision points."""
    return f"{min(N_BINS - 1, nodes // NODES_PER_BIN)}:{min(N_BINS - 1, branches // BRANCHES_PER_BIN)}"
