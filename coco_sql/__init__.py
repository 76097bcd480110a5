"""coco-sql: evolve SQL AI-function pipelines against labelled data, with the warehouse as the source of truth.

`coco_sql.api` is the library's entry point; `coco_sql.connect(path)` returns a DuckDB connection on which the
procedures run (`CALL coco_evolve('lockpicking6', 30, {'seed': 1})`).
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def connect(path: str = ":memory:") -> Any:
    """A DuckDB connection to `path` with coco-sql's tables and procedures installed (see coco_sql.procedures):
    the file engine's (`plugins.FILE_ENGINE`, `EnginePlugin.connect`), found through the registry."""
    from coco_sql.plugins import FILE_ENGINE, engine

    return engine(FILE_ENGINE).connect(path)
