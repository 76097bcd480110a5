"""PACE's primitive-aware operators around a language's offline mutator (PACE, "Primitive-Aware Operators").

Each proposal draws one operator with equal probability, as in the paper, and exposes primitives chosen by
Thompson sampling over their Beta posteriors (`primitives.thompson`); the library and posteriors come with the
request (`MutationRequest.primitives`), and every draw uses the injected RNG, so resume stays exact.

- P1 insertion: FOCUS (Thompson's pick among the primitives the parent does not call) is put into the parent:
  SQL as a new first WHEN arm `FOCUS(cols) THEN v` of a CASE (v: each value that CASE already returns), or,
  when the parent holds FOCUS's body verbatim, by refactoring it into a call; Python as a new weighted term of
  an argmin/argmax objective (`languages.python.ops.insert_terms`). The drafts are tested on the training rows and the
  best is the child.
- P2 replacement: every call of a primitive the parent calls (TARGET, uniform) becomes a call of Thompson's pick
  among the others (REPLACEMENT), with the replacement's own parameters as arguments: a primitive's parameters
  are the columns (SQL) or entry-function parameters (Python) it was made from.
- P3 preserving refinement: the language's offline mutator edits the parent. For SQL it edits the parent with
  its macros expanded, and the macro bodies still present afterwards are folded back into calls, so its whole
  machinery (screening, joint fit, drafts tested in the engine) works on primitive-carrying programs.
- P4 crossover: a second parent (an elite calling a primitive this parent does not) gives that primitive,
  Thompson's pick among such, inserted as in P1 while the parent keeps its own.

A mutator that writes code with a model (the agent) applies every operator itself: it gets the operator as an
instruction with the primitives' definitions (`MutationRequest.operator`) and the same contract checker as a
tool, as PACE's prompts P1-P4 state them.

An operator the parent cannot take (P1 with every primitive called or k of them already, P2 without a call or
another primitive, P4 without a primitive of its own or a partner) falls back to P3, which always can.
The child's contract (`primitives.contracts`) is checked on its parsed call set before it is evaluated; the
verdict travels in `Proposal.notes["primitive"]`, and the loop records the trial, verified or not. A child that
breaks its contract is still evaluated as an ordinary child (its evaluation is spent either way), but its trial
is unverified and does not move any posterior.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from coco_sql.errors import CandidateRejected
from coco_sql.mutate.base import MutationRequest, Mutator, OperatorBrief, Proposal
from coco_sql.primitives.calls import adapter, call_set
from coco_sql.primitives.context import PrimitiveContext
from coco_sql.primitives.contracts import Contract, verify
from coco_sql.primitives.edits import prune_definitions, with_definitions
from coco_sql.primitives.library import OPERATORS, Primitive, PrimitiveLibrary
from coco_sql.primitives.thompson import thompson_pick

MAX_INSERTIONS = 16  # drafts tested for one insertion (P1, P4)


@dataclass(frozen=True)
class Plan:
    """One operator application: the contract the child must satisfy and, for P4, the second parent."""

    contract: Contract
    partner_id: str | None = None
    partner_code: str | None = None
    fallback: str | None = None  # the operator drawn, when it could not apply and P3 was used instead

    def as_notes(self) -> dict[str, Any]:
        return {
            "operator": self.contract.operator,
            "focus": self.contract.focus,
            "target": self.contract.target,
            "partner": self.partner_id,
            "drawn": self.fallback or self.contract.operator,
        }


def plan_operator(
    request: MutationRequest, context: PrimitiveContext, language: str, dialect: str, rng: np.random.Generator
) -> Plan:
    """Draw P1-P4 uniformly and its primitives by Thompson sampling (module docstring for the fallbacks)."""
    library, k = context.library, context.k
    names = library.names(language)
    calls = call_set(request.parent.code, language, names, dialect=dialect)
    drawn = OPERATORS[int(rng.integers(len(OPERATORS)))]
    refine = Plan(Contract("P3", exposed=None, k=k), fallback=None if drawn == "P3" else drawn)
    if drawn == "P1":
        open_names = [n for n in names if n not in calls]
        if not open_names or len(calls) >= k:
            return refine
        focus = thompson_pick(open_names, context.posteriors, rng)[0]
        return Plan(Contract("P1", focus=focus, k=k))
    if drawn == "P2":
        if not calls:
            return refine
        target = sorted(calls)[int(rng.integers(len(calls)))]
        others = [n for n in names if n not in calls]
        if not others:
            return refine
        focus = thompson_pick(others, context.posteriors, rng)[0]
        return Plan(Contract("P2", focus=focus, target=target, k=k))
    if drawn == "P4":
        if not calls or len(calls) >= k:
            return refine
        partners: dict[str, tuple[str, str]] = {}  # primitive -> (elite id, code): the first elite calling it
        for view in request.others:
            for name in sorted(call_set(view.code, language, names, dialect=dialect) - calls):
                partners.setdefault(name, (view.program_id, view.code))
        if not partners:
            return refine
        focus = thompson_pick(partners, context.posteriors, rng)[0]
        partner_id, partner_code = partners[focus]
        return Plan(Contract("P4", focus=focus, k=k), partner_id, partner_code)
    return refine


class PrimitiveAwareMutator:
    """Wraps a language's offline mutator with the P1-P4 operators. Without a library (primitives off, or none
    discovered yet) it is the inner mutator unchanged."""

    def __init__(self, inner: Mutator, *, language: str, entry: str | None = None) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", "offline")
        self.uses_models = getattr(
            inner, "uses_models", False
        )  # the loop gives such a mutator its chat models
        self.language = language
        self.entry = entry

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        context = request.primitives
        if context is None or not context.library.names(self.language):
            return self.inner.propose(request, rng)
        dialect = request.env.dialect
        plan = plan_operator(request, context, self.language, dialect, rng)
        operator = plan.contract.operator
        if self.uses_models:
            proposal = self.inner.propose(self._briefed(request, plan, context.library, dialect), rng)
        elif operator == "P3":
            proposal = self._refine(request, context.library, dialect, rng)
        else:
            moved = (
                self._replace(request, context.library, plan.contract, dialect)
                if operator == "P2"
                else self._insert(request, context.library, plan.contract, dialect)
            )
            proposal = self._complete(request, moved, plan, context.library, dialect, rng)
        reason = _verify(plan, request.parent.code, proposal.code, self.language, context.library, dialect)
        notes = {**plan.as_notes(), "verified": reason is None, "reason": reason}
        named = (
            proposal.approach
            if proposal.approach.startswith(f"{operator}:")
            else f"{operator}: {proposal.approach}"
        )
        return replace(
            proposal,
            approach=named,  # the ledger line names the operator
            donor_id=proposal.donor_id or plan.partner_id,
            notes={**proposal.notes, "primitive": notes},
        )

    # -- operators -------------------------------------------------------------------------------------------
    def _briefed(
        self, request: MutationRequest, plan: Plan, library: PrimitiveLibrary, dialect: str
    ) -> MutationRequest:
        """The request with the operator as an instruction and its checker, for a model-driven mutator."""
        parent, language = request.parent.code, self.language

        def check(code: str) -> str | None:
            return _verify(plan, parent, code, language, library, dialect)

        return replace(request, operator=OperatorBrief(brief(plan, library, language), check))

    def _refine(
        self, request: MutationRequest, library: PrimitiveLibrary, dialect: str, rng: np.random.Generator
    ) -> Proposal:
        """P3: the inner mutator's child (SQL: edited with its macros expanded, then folded back). The inner
        mutator sees its own approaches in `tried`: the ledger's operator prefixes are taken off."""
        context = replace(request.context, tried=inner_approaches(request.context.tried))
        request = replace(request, context=context)
        return adapter(self.language).refine(self.inner, request, library, rng, dialect=dialect)

    def _complete(
        self,
        request: MutationRequest,
        moved: Proposal,
        plan: Plan,
        library: PrimitiveLibrary,
        dialect: str,
        rng: np.random.Generator,
    ) -> Proposal:
        """The whole child of P1, P2 or P4: the primitive moved into the parent, then the inner mutator's edit
        of that (PACE's prompts ask for a complete child around the primitive, not the bare move). When that
        edit breaks the operator's contract (it dropped the focus, say), the bare move is the child."""
        if moved.discarded is not None:
            return moved
        draft = replace(request.parent, code=moved.code)
        refined = self._refine(replace(request, parent=draft), library, dialect, rng)
        if refined.discarded is not None or refined.exhausted is not None or refined.code == moved.code:
            return moved
        if _verify(plan, request.parent.code, refined.code, self.language, library, dialect) is not None:
            return replace(
                moved, notes={**moved.notes, "completion": f"broke the contract: {refined.approach}"}
            )
        return replace(
            refined,
            approach=f"{moved.approach}; then {refined.approach}",
            notes={**refined.notes, "moved": moved.notes},
        )

    def _replace(
        self, request: MutationRequest, library: PrimitiveLibrary, contract: Contract, dialect: str
    ) -> Proposal:
        """P2: every call of TARGET becomes a call of REPLACEMENT."""
        assert contract.target is not None and contract.focus is not None
        target, replacement = library.get(contract.target), library.get(contract.focus)
        swapped = swap_calls(request.parent.code, self.language, target, replacement, dialect)
        if swapped is None:
            return Proposal(
                request.parent.code, "P2 could not rename the calls", discarded="P2 rename failed"
            )
        code = prune_definitions(
            with_definitions(swapped, self.language, [replacement], dialect=dialect),
            self.language,
            library,
            dialect=dialect,
        )
        return Proposal(code, f"P2: replace primitive {target.name} by {replacement.name}")

    def _insert(
        self, request: MutationRequest, library: PrimitiveLibrary, contract: Contract, dialect: str
    ) -> Proposal:
        """P1 and P4: FOCUS inserted where it scores best on the training rows."""
        assert contract.focus is not None
        focus = library.get(contract.focus)
        drafts = adapter(self.language).insertions(request.parent.code, focus, library, dialect=dialect)
        drafts = drafts[:MAX_INSERTIONS]
        verb = "insert" if contract.operator == "P1" else "cross in"
        best: tuple[float, str, str] | None = None
        tested = 0
        for description, code in drafts:
            if request.env.check(code) is not None:
                continue
            outcome = request.env.test_draft(code)
            tested += 1
            if outcome.ok and (best is None or outcome.score > best[0]):
                best = (outcome.score, description, code)
        notes = {"drafts_tested": tested, "candidates": len(drafts)}
        if best is None:
            return Proposal(
                request.parent.code,
                f"{contract.operator}: no valid place to {verb} {focus.name}",
                notes=notes,
                discarded=f"{contract.operator}: no valid insertion of {focus.name}",
            )
        score, description, code = best
        return Proposal(
            code,
            f"{contract.operator}: {verb} {focus.name}: {description}",
            notes={**notes, "train_score": score},
        )


def swap_calls(
    code: str, language: str, target: Primitive, replacement: Primitive, dialect: str
) -> str | None:
    """`code` with each call of `target` replaced by a call of `replacement` on its own parameters (definitions
    untouched); None when `code` does not parse or does not call `target`."""
    return adapter(language).swap_calls(code, target, replacement, dialect=dialect)


def signature_params(primitive: Primitive) -> list[str]:
    return [p.strip() for p in primitive.signature.partition("(")[2].rstrip(")").split(",") if p.strip()]


def brief(plan: Plan, library: PrimitiveLibrary, language: str) -> str:
    """PACE's operator prompt (P1-P4) for this plan, with the definitions the child may need."""
    c = plan.contract
    where = adapter(language).where_definitions
    lines = {
        "P1": f"P1 insertion: use the primitive {c.focus} meaningfully in the child, and keep every primitive the "
        "parent calls.",
        "P2": f"P2 replacement: replace the primitive {c.target} by {c.focus} and adapt the program so that "
        f"{c.focus} is used meaningfully; {c.target} must no longer be called; keep the other primitives.",
        "P3": "P3 refinement: refine how the program invokes, combines or conditions its primitives (thresholds "
        "and fallbacks may change); call exactly the primitives the parent calls, no more, no fewer.",
        "P4": f"P4 crossover: combine the parent with the second parent {plan.partner_id} below; call {c.focus} "
        "and at least one primitive the parent calls.",
    }
    shown = [name for name in (c.focus, c.target) if name]
    text = [
        lines[c.operator],
        f"Call at most {c.k} primitives. Carry the definition of each primitive you call {where}; do not edit "
        "a definition (an edited copy is not the primitive).",
        *(f"\n{library.get(name).code}" for name in shown),
    ]
    if plan.partner_code:
        text.append(f"\nThe second parent {plan.partner_id}:\n{plan.partner_code}")
    text.append("\nThe tool check_primitives says whether the candidate keeps this contract.")
    return "\n".join(text)


def inner_approaches(tried: frozenset[str]) -> frozenset[str]:
    """The approaches as the inner mutator wrote them: 'P3: x' is x, and 'P1: insert p: ...; then x' is x."""
    found = set(tried)
    for approach in tried:
        head, sep, rest = approach.partition(": ")
        if sep and head in OPERATORS:
            found.add(rest)
            found.add(rest.rpartition("; then ")[2])
    return frozenset(found)


def _verify(
    plan: Plan, parent: str, child: str, language: str, library: PrimitiveLibrary, dialect: str
) -> str | None:
    try:
        return verify(plan.contract, parent, child, language, library, plan.partner_code, dialect=dialect)
    except CandidateRejected as rejection:
        return f"{plan.contract.operator}: {rejection}"
