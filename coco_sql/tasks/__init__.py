"""Task packs: labelled data, splits, output contracts and scorers that a SQL program is evolved against.

See :mod:`coco_sql.tasks.loader` (and ``tasks/README.md``) for the ``task.toml`` format.
"""

from coco_sql.tasks.coerce import CONTRACT_TYPES, coerce_output, parse_expected
from coco_sql.tasks.loader import DIALECTS, Contract, TaskInfo, TaskPack
from coco_sql.tasks.lookup import default_search_paths, list_tasks, load_task
from coco_sql.tasks.scorers import (
    SCORER_KINDS,
    ExactScorer,
    MultilabelF1Scorer,
    NumericScorer,
    Scorer,
    SqlScorer,
    TokenMatchScorer,
)
from coco_sql.tasks.splits import SPLIT_MODES, SPLIT_NAMES, Split, partition_ids

__all__ = [
    "CONTRACT_TYPES",
    "DIALECTS",
    "SCORER_KINDS",
    "SPLIT_MODES",
    "SPLIT_NAMES",
    "Contract",
    "ExactScorer",
    "MultilabelF1Scorer",
    "NumericScorer",
    "Scorer",
    "Split",
    "SqlScorer",
    "TaskInfo",
    "TaskPack",
    "TokenMatchScorer",
    "coerce_output",
    "default_search_paths",
    "list_tasks",
    "load_task",
    "parse_expected",
    "partition_ids",
]
