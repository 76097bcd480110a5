"""Mutators: the interface, and the offline (no-LLM) mutator of data-driven SQL AST edits."""

from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
from coco_sql.mutate.offline import OfflineMutator, OperatorShares
from coco_sql.reflect.context import ContextBundle, ProgramView

__all__ = [
    "ContextBundle",
    "MutationRequest",
    "Mutator",
    "OfflineMutator",
    "OperatorShares",
    "ProgramView",
    "Proposal",
]
