"""What the loop hands a primitive-aware mutator each iteration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coco_sql.primitives.contracts import K_DEFAULT
from coco_sql.primitives.library import PrimitiveLibrary
from coco_sql.primitives.thompson import Posterior


@dataclass(frozen=True)
class PrimitiveContext:
    """The run's library, the posteriors of its primitives (from verified trials) and k, the bound on
    primitives per program."""

    library: PrimitiveLibrary
    posteriors: Mapping[str, Posterior] = field(default_factory=dict)
    k: int = K_DEFAULT
