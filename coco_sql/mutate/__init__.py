"""Mutators: the interface, and the offline (no-LLM) mutator of data-driven SQL AST edits."""

from coco_sql.mutate.base import MutationRequest, Mutator, ProgramView, Proposal
from coco_sql.mutate.offline import OfflineMutator, OperatorShares

__all__ = ["MutationRequest", "Mutator", "OfflineMutator", "OperatorShares", "ProgramView", "Proposal"]
