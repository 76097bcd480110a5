"""The plug-in registry: program kinds and engines by name, imported only when asked for.

A kind is a `languages.base.KindPlugin`, an engine an `engines.EnginePlugin`; each is named by a "module:attr"
string. The built-ins are listed here (a source checkout finds them without being installed) and declared again
in pyproject.toml under the same entry point groups, `coco_sql.languages` and `coco_sql.engines`, which is how
a kind or an engine shipped as its own package is found, as dbt finds its adapters:

    [project.entry-points."coco_sql.languages"]
    mykind = "my_package:PLUGIN"

Why strings and lazy imports: importing the registry (the CLI, `tasks`, `--help`) loads no kind, and a kind's
heavy dependencies (sqlglot, the sandboxes) load with it, when a task of that kind is used. A built-in name is
resolved without reading the installed distributions' metadata; an unknown name reads them once per call
(no cache is kept here: `sys.modules` already keeps the imported plug-ins). A built-in name wins over an entry
point of the same name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.plugin_loader import (
    BUILTIN_ENGINES,
    BUILTIN_KINDS,
    DEPLOY_DIALECT,
    ENGINE_GROUP,
    KIND_GROUP,
    SANDBOX_DIALECT,
    engine_names,
    kind_names,
    load_engine,
    load_kind,
    local_ai,
)

if TYPE_CHECKING:
    from pathlib import Path

    from coco_sql.engines import EnginePlugin
    from coco_sql.languages.kind import KindPlugin
    from coco_sql.store import Warehouse

FILE_ENGINE = SANDBOX_DIALECT  # the engine of a store given as a database file (`db=` a path)
DEPLOY_ENGINE = (
    DEPLOY_DIALECT  # the warehouse a champion deploys to (`coco-sql check-deploy`, the warehouse forms)
)


def kind(name: str, *, task: str | None = None) -> KindPlugin:
    """The kind `name`; a one-line TaskError naming the known kinds when there is none (`task`: whose)."""
    return load_kind(name, task=task)


def export_forms() -> tuple[str, ...]:
    """Every form `coco-sql export` takes: `sql` (the program as evolved), then each kind's exporter's and folder
    export's forms, kinds in `kind_names()` order. Loads every kind."""
    forms = ["sql"]
    for name in kind_names():
        plugin = kind(name)
        for part in (plugin.exports, plugin.folder_export):
            forms += sorted(set(getattr(part, "forms", ())) - set(forms))
    return tuple(forms)


def engine(name: str) -> EnginePlugin:
    """The engine `name`; a one-line ConfigError naming the known engines when there is none."""
    return load_engine(name)  # type: ignore[no-any-return]


def open_store(path: str | Path, *, read_only: bool = False) -> Warehouse:
    """The store of the database file `path`: `FILE_ENGINE`'s (`EnginePlugin.open_store`), imported now."""
    return engine(FILE_ENGINE).open_store(path, read_only=read_only)


def deploy_engine() -> EnginePlugin:
    """The engine a champion deploys to (`DEPLOY_ENGINE`): its deploy check (`EnginePlugin.check_deploy`)."""
    return engine(DEPLOY_ENGINE)


__all__ = [
    "BUILTIN_ENGINES",
    "BUILTIN_KINDS",
    "DEPLOY_ENGINE",
    "ENGINE_GROUP",
    "FILE_ENGINE",
    "KIND_GROUP",
    "deploy_engine",
    "engine",
    "engine_names",
    "export_forms",
    "kind",
    "kind_names",
    "local_ai",
    "open_store",
]
