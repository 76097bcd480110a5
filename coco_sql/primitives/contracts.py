"""The four primitive-aware operator contracts, checked on call sets before a child is evaluated (PACE,
"Primitive-Aware Operators" and prompts P1-P4).

Let V be the primitives exposed to the operator and C_V(A) = C(A) ∩ V the ones program A calls among them.
For a child A' of parent A (and, for P4, second parent B):

    P1 insertion      FOCUS ∈ C(A')  and  C_V(A) \\ {FOCUS} ⊆ C(A')            (keeps every protected primitive)
    P2 replacement    REPLACEMENT ∈ C(A'),  TARGET ∉ C(A'),  C_V(A) \\ {TARGET, REPLACEMENT} ⊆ C(A')
    P3 refinement     C_V(A') = C_V(A)                                       (no primitive added or removed)
    P4 crossover      C(A') ∩ C_V(A) ≠ ∅,  C(A') ∩ C_V(B) ≠ ∅,  |C(A')| ≤ k

and for every operator |C(A')| ≤ k (k = 3, "a unified parameter k=3 bounds the maximum number of EAPs per
algorithm") and each called primitive's definition in the child is the library's own ("child redefines p_x"
otherwise: an edited copy would credit the library primitive with someone else's logic). P4 is checked as the
paper states it: a parent that calls no primitive gives nothing to inherit, so the contract cannot hold; the
operator is meant for two parents that each call one.

"The call-set relations ... operate as strict structural constraints": a violation is reported as one line
naming what is wrong, and the trial is recorded unverified (it does not update the Thompson posterior).
"""

from __future__ import annotations

from dataclasses import dataclass

from coco_sql.errors import CandidateRejected
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.primitives.calls import call_set, definitions, library_definition
from coco_sql.primitives.library import OPERATORS, PrimitiveLibrary

K_DEFAULT = 3
"""k: at most this many primitives per program (PACE, Table 8)."""


def _names(items: frozenset[str] | set[str]) -> str:
    return ", ".join(sorted(items))


@dataclass(frozen=True)
class Contract:
    """One operator's contract. `focus` is P1's FOCUS and P2's REPLACEMENT; `target` is P2's TARGET;
    `exposed` is V (None: every primitive of the library)."""

    operator: str  # P1 | P2 | P3 | P4
    focus: str | None = None
    target: str | None = None
    exposed: frozenset[str] | None = None
    k: int = K_DEFAULT

    def __post_init__(self) -> None:
        if self.operator not in OPERATORS:
            raise ValueError(f"unknown operator {self.operator!r} (expected one of {', '.join(OPERATORS)})")
        if self.operator in ("P1", "P2") and self.focus is None:
            raise ValueError(f"{self.operator} needs a focus primitive")
        if self.operator == "P2" and self.target is None:
            raise ValueError("P2 needs a target primitive")

    def _v(self, calls: frozenset[str]) -> frozenset[str]:
        return calls if self.exposed is None else calls & self.exposed

    def check(
        self,
        parent_calls: frozenset[str],
        child_calls: frozenset[str],
        other_parent_calls: frozenset[str] | None = None,
    ) -> str | None:
        """None when the call sets satisfy the contract, else a one-line reason (e.g. "P2: child still calls
        target p_a"). Call sets are over the library's names; this applies V."""
        op, parent = self.operator, self._v(parent_calls)
        if len(child_calls) > self.k:
            return f"{op}: child calls {len(child_calls)} primitives ({_names(child_calls)}), more than k={self.k}"
        if op == "P1":
            if self.focus not in child_calls:
                return f"P1: child does not call focus {self.focus}"
            dropped = parent - {self.focus} - child_calls
            if dropped:
                return f"P1: child drops protected {_names(dropped)}"
        elif op == "P2":
            if self.target in child_calls:
                return f"P2: child still calls target {self.target}"
            if self.focus not in child_calls:
                return f"P2: child does not call replacement {self.focus}"
            dropped = parent - {self.focus, self.target} - child_calls
            if dropped:
                return f"P2: child drops protected {_names(dropped)}"
        elif op == "P3":
            child = self._v(child_calls)
            if child - parent:
                return f"P3: child adds {_names(child - parent)}"
            if parent - child:
                return f"P3: child removes {_names(parent - child)}"
        else:
            other = self._v(other_parent_calls or frozenset())
            if not parent & child_calls:
                return f"P4: child calls nothing from parent 1 ({_names(parent) or 'it calls no primitive'})"
            if not other & child_calls:
                return f"P4: child calls nothing from parent 2 ({_names(other) or 'it calls no primitive'})"
        return None


def check_definitions(
    child_code: str, language: str, child_calls: frozenset[str], library: PrimitiveLibrary, *, dialect: str
) -> str | None:
    """Every called primitive must be defined in the child as the library defines it."""
    carried = definitions(child_code, language, dialect=dialect)
    for name in sorted(child_calls):
        if name not in carried:
            return f"child calls {name} without its definition"
        if carried[name] != library_definition(library.get(name), dialect=dialect):
            return f"child redefines {name}"
    return None


def verify(
    contract: Contract,
    parent_code: str,
    child_code: str,
    language: str,
    library: PrimitiveLibrary,
    other_parent_code: str | None = None,
    *,
    dialect: str = SANDBOX_DIALECT,
) -> str | None:
    """Check `contract` on the complete child (its primitive definitions included): None when it holds, else
    the one-line violation. Call sets are over the library's primitives of `language`; a child that does not
    parse is a violation with the parser's reason. P4 needs `other_parent_code`."""
    names = library.names(language)
    try:
        child_calls = call_set(child_code, language, names, dialect=dialect)
    except CandidateRejected as error:
        return f"{contract.operator}: child does not parse: {error}"
    parent_calls = call_set(parent_code, language, names, dialect=dialect)
    other_calls = None
    if contract.operator == "P4":
        if other_parent_code is None:
            raise ValueError("P4 needs the second parent's code")
        other_calls = call_set(other_parent_code, language, names, dialect=dialect)
    reason = contract.check(parent_calls, child_calls, other_calls)
    if reason is None:
        try:
            broken = check_definitions(child_code, language, child_calls, library, dialect=dialect)
        except CandidateRejected as error:
            return f"{contract.operator}: child does not parse: {error}"
        reason = None if broken is None else f"{contract.operator}: {broken}"
    return reason
