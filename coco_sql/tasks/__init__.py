"""Task packs: labelled data, splits, output contracts and scorers that a program is evolved against.

See :mod:`coco_sql.tasks.loader` (and ``tasks/README.md``) for the ``task.toml`` format. Exports load on first
use (`coco_sql.lazy`): listing packs (`tasks.catalog`) loads no pandas, DuckDB or sqlglot.
"""

from coco_sql.lazy import lazy_exports

_WHERE = {
    "CONTRACT_TYPES": ".coerce",
    "coerce_output": ".coerce",
    "parse_expected": ".coerce",
    "DIALECTS": ".loader",
    "Contract": ".loader",
    "TaskInfo": ".loader",
    "TaskPack": ".loader",
    "default_search_paths": ".catalog",
    "list_tasks": ".lookup",
    "load_task": ".lookup",
    "SCORER_KINDS": ".scorers",
    "ExactScorer": ".scorers",
    "MultilabelF1Scorer": ".scorers",
    "NumericScorer": ".scorers",
    "Scorer": ".scorers",
    "SqlScorer": ".scorers",
    "TokenMatchScorer": ".scorers",
    "SPLIT_MODES": ".splits",
    "SPLIT_NAMES": ".splits",
    "Split": ".splits",
    "partition_ids": ".splits",
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
