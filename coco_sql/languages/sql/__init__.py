"""SQL programs: one read-only query (with its primitives as DuckDB macros), checked by `sqlcheck`, run in the
DuckDB sandbox or on a warehouse engine. `PLUGIN` is the kind as `coco_sql.plugins` finds it."""

from coco_sql.languages.sql.language import SqlLanguage, SqlRunner
from coco_sql.languages.sql.plugin import PLUGIN

__all__ = ["PLUGIN", "SqlLanguage", "SqlRunner"]
