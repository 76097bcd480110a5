"""Program languages behind one seam (`languages.base.Language`): SQL, Python, dbt projects, and agent specs
(data agents).

LANGUAGES (`languages.kinds`) maps a task's `language` (task.toml) to the factory of its implementation. Exports
load on first use (`coco_sql.lazy`): importing the protocol does not load SQL and Python.
"""

from coco_sql.lazy import lazy_exports

_WHERE = {
    "EXPORTERS": ".kinds",
    "LANGUAGES": ".kinds",
    "PACK_LOADERS": ".kinds",
    "exporter": ".kinds",
    "pack_loader": ".kinds",
    "Language": ".base",
    "LanguageFactory": ".base",
    "Program": ".base",
    "PythonLanguage": ".python",
    "RunResult": ".base",
    "Runner": ".base",
    "SqlLanguage": ".sql",
    "language_for": ".base",
}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
