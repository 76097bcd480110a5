"""The offline mutator for Python programs: AST edits (`ops`), tested on training rows before one is
proposed (no model).

One proposal:

1. parse the parent and the other elites (`request.others`: the partners for recombination);
2. list every edit each operator can make, minus those whose approach the parent's earlier children already
   took (`request.context.tried`) and those that leave the code unchanged;
3. draw up to `max_drafts` of them, operator by operator in proportion to `OperatorShares` (a share an operator
   cannot fill flows to the others), each operator's edits in a random order;
4. score each draft on the training rows (`env.test_draft`; a draft the validator rejects is skipped) and
   propose the best by mean training score, the first drawn winning a tie, also when it does not beat the
   parent (validation and the archive decide what is kept).

When the ledger shows stagnation, the shares move from tuning constants to structure (new terms, guards,
recombination). With `probe=False` (the ablation) nothing is tested: one random edit that the validator accepts
is proposed as is. Everything random comes from the injected RNG.
"""

from __future__ import annotations

import ast
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from coco_sql.languages.python.ops import (
    Donor,
    Edit,
    drop_guards,
    drop_terms,
    insert_guards,
    insert_terms,
    recombine,
    swap_guards,
    term_pool,
    tune_constants,
)
from coco_sql.languages.python.pace_defs import definition_dumps
from coco_sql.mutate.base import MutationRequest, Proposal
from coco_sql.mutate.drafts import try_drafts

if TYPE_CHECKING:
    from coco_sql.languages.kind import OfflineSettings

STAGNATION_WINDOW = 5


@dataclass(frozen=True)
class OperatorShares:
    """How the draft budget is split between operators."""

    tune: float = 0.35
    insert: float = 0.25
    recombine: float = 0.15
    guard: float = 0.1
    drop: float = 0.1
    swap: float = 0.05


RESTRUCTURE = OperatorShares(tune=0.15, insert=0.35, recombine=0.2, guard=0.15, drop=0.1, swap=0.05)


class PythonOfflineMutator:
    name = "offline"

    def __init__(self, settings: OfflineSettings, shares: OperatorShares | None = None) -> None:
        """`settings` are checked (`engine.registry`): the kind's typed offline settings."""
        self.max_drafts = settings.max_drafts
        self.probe = settings.probe
        self.shares = shares or OperatorShares()

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        parent = request.parent
        tree = ast.parse(parent.code)
        donors = [Donor(view.program_id, parsed) for view in request.others if (parsed := _parse(view.code))]
        stagnant = request.context.stagnant(STAGNATION_WINDOW)
        frozen = frozenset(request.primitives.library.names("python")) if request.primitives else frozenset()
        by_operator = _edits(tree, donors, parent.code, request.context.tried, frozen)
        ordered = _draw(by_operator, RESTRUCTURE if stagnant else self.shares, rng)
        total = sum(len(edits) for edits in by_operator.values())
        if not ordered:
            return Proposal(
                parent.code, "no untried edit left", notes={"candidates": 0}, exhausted="no untried edit left"
            )
        notes: dict[str, Any] = {"candidates": total, "stagnant": stagnant}
        if not self.probe:
            edit = next((e for e in ordered if request.env.check(e.code) is None), ordered[0])
            return _proposal(edit, notes | {"operator": edit.operator, "tested": False})
        parent_score = request.env.test_draft(parent.code).score
        found = try_drafts(request.env, ordered, lambda e: e.code, max_drafts=self.max_drafts, rng=rng)
        tested = len(found.tested)
        if found.best is None:  # every draft failed: propose the first, whose failure the evaluation records
            return _proposal(ordered[0], notes | {"operator": ordered[0].operator, "drafts_tested": tested})
        edit = found.best
        return _proposal(
            edit,
            notes
            | {
                "operator": edit.operator,
                "drafts_tested": tested,
                "train_score": found.score,
                "parent_train_score": parent_score,
            },
        )


def _parse(code: str) -> ast.Module | None:
    try:
        return ast.parse(code)
    except (SyntaxError, ValueError):
        return None


def _edits(
    tree: ast.Module,
    donors: list[Donor],
    code: str,
    tried: frozenset[str],
    frozen: frozenset[str] = frozenset(),
) -> dict[str, list[Edit]]:
    """Every edit of every operator, without the tried approaches, no-ops, duplicate codes and edits inside a
    `frozen` function (a PACE primitive: it changes only through the library, never in one program)."""
    kept_defs = definition_dumps(tree, frozen)
    pool = term_pool(tree, donors)
    generators = {
        "tune": tune_constants(tree),
        "insert": insert_terms(tree, pool),
        "recombine": recombine(tree, donors),
        "guard": insert_guards(tree, donors),
        "drop": [*drop_terms(tree), *drop_guards(tree)],
        "swap": swap_guards(tree),
    }
    seen = {code, ast.unparse(tree) + "\n"}
    result: dict[str, list[Edit]] = {}
    for operator, edits in generators.items():
        kept = []
        for edit in edits:
            if edit.approach not in tried and edit.code not in seen:
                seen.add(edit.code)
                if not frozen or definition_dumps(ast.parse(edit.code), frozen) == kept_defs:
                    kept.append(edit)
        result[operator] = kept
    return result


def _draw(by_operator: dict[str, list[Edit]], shares: OperatorShares, rng: np.random.Generator) -> list[Edit]:
    """All edits in drawing order: each next one from an operator chosen in proportion to its share among the
    operators that have edits left, each operator's edits in a random order."""
    queues = {
        op: [edits[i] for i in rng.permutation(len(edits))] for op, edits in by_operator.items() if edits
    }
    weights = asdict(shares)
    ordered: list[Edit] = []
    while queues:
        names = sorted(queues)
        p = np.array([weights[name] for name in names], dtype=float)
        p = p / p.sum() if p.sum() > 0 else np.full(len(names), 1.0 / len(names))
        name = names[int(rng.choice(len(names), p=p))]
        ordered.append(queues[name].pop(0))
        if not queues[name]:
            del queues[name]
    return ordered


def _proposal(edit: Edit, notes: dict[str, Any]) -> Proposal:
    strategy = "recombine" if edit.operator == "recombine" else "hillclimb"
    return Proposal(edit.code, edit.approach, strategy=strategy, donor_id=edit.donor_id, notes=notes)
