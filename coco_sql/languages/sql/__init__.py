"""SQL programs: one read-only query (with its primitives as DuckDB macros, `sqlkit.macros`), checked by
`sqlkit.validate`, run in the DuckDB sandbox or on a warehouse engine (`warehouse`). `PLUGIN` is the kind as `coco_sql.plugins` finds
it.

Exports load on first use (`coco_sql.lazy`), so importing the package loads nothing of the kind."""

from coco_sql.lazy import lazy_exports

_WHERE = {"PLUGIN": ".plugin", "SqlLanguage": ".language", "SqlRunner": ".language"}

__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
