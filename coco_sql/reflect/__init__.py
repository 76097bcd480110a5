"""Reflection: the mutator's live environment (and, later, the ledger curator and history tools)."""

from coco_sql.reflect.environment import DraftEnvironment

__all__ = ["DraftEnvironment"]
