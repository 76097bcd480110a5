"""Sandboxed execution of candidates, deadlines, per-row scores and observations."""

from coco_sql.evaluate.evaluator import REPORT_SPLITS, SEARCH_SPLITS, Evaluator, Outcome
from coco_sql.evaluate.sandbox import QueryResult, Sandbox, SandboxLimits

__all__ = [
    "REPORT_SPLITS",
    "SEARCH_SPLITS",
    "Evaluator",
    "Outcome",
    "QueryResult",
    "Sandbox",
    "SandboxLimits",
]
