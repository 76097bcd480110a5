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

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from coco_sql.errors import ConfigError, TaskError
from coco_sql.lazy import load_target

if TYPE_CHECKING:
    from pathlib import Path

    from coco_sql.engines import EnginePlugin
    from coco_sql.languages.kind import KindPlugin
    from coco_sql.store import Warehouse

KIND_GROUP = "coco_sql.languages"
ENGINE_GROUP = "coco_sql.engines"

BUILTIN_KINDS: dict[str, str] = {
    "sql": "coco_sql.languages.sql:PLUGIN",
    "python": "coco_sql.languages.python:PLUGIN",
    "dbt": "coco_sql.languages.dbt.kind:PLUGIN",
    "agent_spec": "coco_sql.languages.agent_spec.kind:PLUGIN",
}
BUILTIN_ENGINES: dict[str, str] = {
    "duckdb": "coco_sql.engines.duckdb:PLUGIN",
    "snowflake": "coco_sql.engines.snowflake:PLUGIN",
}
FILE_ENGINE = "duckdb"  # the engine of a store given as a database file (`db=` a path)
DEPLOY_ENGINE = (
    "snowflake"  # the warehouse a champion deploys to (`coco-sql check-deploy`, the warehouse forms)
)


def _installed(group: str) -> dict[str, str]:
    """name -> "module:attr" of the entry points of `group` in the installed distributions."""
    return {point.name: point.value for point in entry_points(group=group)}


def _names(builtin: dict[str, str], group: str) -> tuple[str, ...]:
    return (*builtin, *sorted(set(_installed(group)) - set(builtin)))


def _load(target: str, group: str, name: str) -> Any:
    try:
        return load_target(target)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"plug-in {name!r} of {group} ({target}) does not load: {error}") from None


def kind_names() -> tuple[str, ...]:
    """The kinds a task may name (task.toml `language`): the built-ins first, then installed ones by name."""
    return _names(BUILTIN_KINDS, KIND_GROUP)


def kind(name: str, *, task: str | None = None) -> KindPlugin:
    """The kind `name`; a one-line TaskError naming the known kinds when there is none (`task`: whose)."""
    target = BUILTIN_KINDS.get(name) or _installed(KIND_GROUP).get(name)
    if target is None:
        whose = f"task {task!r}: " if task is not None else ""
        raise TaskError(f"{whose}unknown language {name!r} (known: {', '.join(kind_names())})")
    plugin = _load(target, KIND_GROUP, name)
    if getattr(plugin, "name", None) != name:  # a foreign object: checked before it is used
        raise ConfigError(f"plug-in {name!r} of {KIND_GROUP} ({target}) is not the KindPlugin named {name!r}")
    return plugin


def export_forms() -> tuple[str, ...]:
    """Every form `coco-sql export` takes: `sql` (the program as evolved), then each kind's exporter's and folder
    export's forms, kinds in `kind_names()` order. Loads every kind."""
    forms = ["sql"]
    for name in kind_names():
        plugin = kind(name)
        for part in (plugin.exports, plugin.folder_export):
            forms += sorted(set(getattr(part, "forms", ())) - set(forms))
    return tuple(forms)


def engine_names() -> tuple[str, ...]:
    """The engines a task may name (task.toml `dialect`): the built-ins first, then installed ones by name."""
    return _names(BUILTIN_ENGINES, ENGINE_GROUP)


def engine(name: str) -> EnginePlugin:
    """The engine `name`; a one-line ConfigError naming the known engines when there is none."""
    target = BUILTIN_ENGINES.get(name) or _installed(ENGINE_GROUP).get(name)
    if target is None:
        raise ConfigError(f"unknown engine {name!r} (known: {', '.join(engine_names())})")
    return _load(target, ENGINE_GROUP, name)


def open_store(path: str | Path, *, read_only: bool = False) -> Warehouse:
    """The store of the database file `path`: `FILE_ENGINE`'s (`EnginePlugin.open_store`), imported now."""
    return engine(FILE_ENGINE).open_store(path, read_only=read_only)


def deploy_engine() -> EnginePlugin:
    """The engine a champion deploys to (`DEPLOY_ENGINE`): its deploy check (`EnginePlugin.check_deploy`)."""
    return engine(DEPLOY_ENGINE)


__all__ = [
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
    "open_store",
]
