"""Mutators: the interface every mutator implements (`base`), the seeded pick among near-best drafts (`choice`)
and PACE's primitive-aware operators around a kind's offline mutator (`pace`). A kind's own operators live in
its package (`languages.sql.mutate`, `languages.python.mutator`)."""

from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
from coco_sql.reflect.context import ContextBundle, ProgramView

__all__ = ["ContextBundle", "MutationRequest", "Mutator", "ProgramView", "Proposal"]
