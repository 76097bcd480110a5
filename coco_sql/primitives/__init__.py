"""PACE primitives: a run's library of reusable primitives, Thompson sampling over their trials, and the call-set
contracts of the primitive-aware operators P1-P4 (paper: "PACE: Primitive-Aware Code Evolution").

- `library`: `Primitive`, `PrimitiveTrial` (the `primitives` / `primitive_trials` rows) and `PrimitiveLibrary`;
- `thompson`: Beta posteriors from verified trials, `thompson_pick`;
- `calls`: call sets C(A) and carried definitions, on the AST;
- `contracts`: `Contract` (P1-P4, the k bound) and `verify`;
- `sqlkit.macros`: SQL primitives as DuckDB scalar macros, expanded inline before validation;
- `extraction`: offline discovery (E2 extraction, E3 `combine`) and the edits that move primitives;
- `adopt`: admit a definition written elsewhere (a model's E1-E3 answer) into the library.
"""

from coco_sql.primitives.contracts import K_DEFAULT, Contract, verify
from coco_sql.primitives.library import Primitive, PrimitiveLibrary, PrimitiveTrial
from coco_sql.primitives.thompson import Posterior, posteriors, thompson_pick

__all__ = [
    "K_DEFAULT",
    "Contract",
    "Posterior",
    "Primitive",
    "PrimitiveLibrary",
    "PrimitiveTrial",
    "posteriors",
    "thompson_pick",
    "verify",
]
