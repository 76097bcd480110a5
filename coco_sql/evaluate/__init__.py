"""Scoring candidates: validate and run them through their language, score every row, keep observations."""

from coco_sql.evaluate.evaluator import REPORT_SPLITS, SEARCH_SPLITS, Evaluator, Outcome

__all__ = ["REPORT_SPLITS", "SEARCH_SPLITS", "Evaluator", "Outcome"]
