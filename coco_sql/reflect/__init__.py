"""Reflection: the mutator's live environment, the context bundle and its curator, the history tools. Exports
load on first use (`coco_sql.lazy`)."""

from coco_sql.lazy import lazy_exports

_WHERE = {"DraftEnvironment": ".environment"}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
