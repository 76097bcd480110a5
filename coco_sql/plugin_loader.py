"""The plug-in registry's loader: the kinds' and engines' names and "module:attr" targets, and a kind loaded by name
as a plain object (`load_kind`). `plugins` types what this loads; this module names no kind's or engine's type.

Why two modules: the loop's own modules that look a kind up by name (the draft environment, PACE's call sets, the
options composed from the kinds) are themselves named by `KindPlugin`'s types (its mutator, draft environment,
primitive library). Were they to import `plugins`, whose `kind()` returns a `KindPlugin`, the type imports would
close a circle through the registry. They read a kind's part here, typed where they use it.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from coco_sql.errors import ConfigError, TaskError
from coco_sql.lazy import load_target

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalAi, LocalFunctions

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

# A kind's own commands of `coco-sql`, as dbt's adapters bring their own: each "module:attr" names a function
# `add_parser(subparsers)` in a light module of the kind (argparse and `cli_help` only; its handler imports the
# kind when it runs), found by the command's name. COMMAND_GROUP's are commands of `coco-sql`, INIT_GROUP's the
# sources `coco-sql init` reads (`cli_help.add_plugin_commands`).
COMMAND_GROUP = "coco_sql.commands"
INIT_GROUP = "coco_sql.init"
BUILTIN_COMMANDS: dict[str, str] = {
    "demo-agent-server": "coco_sql.languages.agent_spec.cli:add_parser",
}
BUILTIN_INIT_SOURCES: dict[str, str] = {
    "dbt": "coco_sql.languages.dbt.cli:add_parser",
}


SANDBOX_DIALECT = "duckdb"
"""DuckDB's dialect: what coco-sql's own SQL is written in (the schema, the named reads), and what a candidate is
checked, rewritten and run in (the sandboxes run DuckDB; a program of another engine is transpiled into it
first, `engines.SqlRules.translated`). Code outside the registry and `engines/` writes this name, never the
dialect's own."""
DEPLOY_DIALECT = "snowflake"
"""The warehouse's dialect (`plugins.DEPLOY_ENGINE`'s): what a champion deploys as (the warehouse forms, CREATE
AI FUNCTION, the cortex_agent, the SQL a proxy writes for Cortex) and what SQL meant for Snowflake is read in."""


def installed(group: str) -> dict[str, str]:
    """name -> "module:attr" of the entry points of `group` in the installed distributions."""
    return {point.name: point.value for point in entry_points(group=group)}


def _names(builtin: dict[str, str], group: str) -> tuple[str, ...]:
    return (*builtin, *sorted(set(installed(group)) - set(builtin)))


def load(target: str, group: str, name: str) -> Any:
    try:
        return load_target(target)
    except (ImportError, AttributeError) as error:
        raise ConfigError(f"plug-in {name!r} of {group} ({target}) does not load: {error}") from None


def kind_names() -> tuple[str, ...]:
    """The kinds a task may name (task.toml `language`): the built-ins first, then installed ones by name."""
    return _names(BUILTIN_KINDS, KIND_GROUP)


def engine_names() -> tuple[str, ...]:
    """The engines a task may name (task.toml `dialect`): the built-ins first, then installed ones by name."""
    return _names(BUILTIN_ENGINES, ENGINE_GROUP)


def load_kind(name: str, *, task: str | None = None) -> Any:
    """The kind `name`, a `languages.kind.KindPlugin` (`plugins.kind` is this, typed); a one-line TaskError naming
    the known kinds when there is none (`task`: whose)."""
    target = BUILTIN_KINDS.get(name) or installed(KIND_GROUP).get(name)
    if target is None:
        whose = f"task {task!r}: " if task is not None else ""
        raise TaskError(f"{whose}unknown language {name!r} (known: {', '.join(kind_names())})")
    plugin = load(target, KIND_GROUP, name)
    if getattr(plugin, "name", None) != name:  # a foreign object: checked before it is used
        raise ConfigError(f"plug-in {name!r} of {KIND_GROUP} ({target}) is not the KindPlugin named {name!r}")
    return plugin


def load_engine(name: str) -> Any:
    """The engine `name`, an `engines.EnginePlugin` (`plugins.engine` is this, typed); a one-line ConfigError
    naming the known engines when there is none."""
    target = BUILTIN_ENGINES.get(name) or installed(ENGINE_GROUP).get(name)
    if target is None:
        raise ConfigError(f"unknown engine {name!r} (known: {', '.join(engine_names())})")
    return load(target, ENGINE_GROUP, name)


def local_ai() -> LocalAi:
    """The AI functions the sandboxes answer in this process: the sandbox engine's (`SANDBOX_DIALECT`'s,
    `EnginePlugin.ai_functions`), imported now. Here, not in `plugins`, for the evaluator and the sandbox
    workers, which `KindPlugin`'s types name."""
    return load_engine(SANDBOX_DIALECT).ai_functions()  # type: ignore[no-any-return]


def local_functions(runtime: Any) -> LocalFunctions:
    """`runtime`'s AI functions (an `llm.runtime.AiRuntime`'s), answered by the sandbox engine's (`local_ai`)."""
    return local_ai().functions(runtime)


__all__ = [
    "BUILTIN_COMMANDS",
    "BUILTIN_ENGINES",
    "BUILTIN_INIT_SOURCES",
    "BUILTIN_KINDS",
    "COMMAND_GROUP",
    "DEPLOY_DIALECT",
    "ENGINE_GROUP",
    "INIT_GROUP",
    "KIND_GROUP",
    "SANDBOX_DIALECT",
    "engine_names",
    "installed",
    "kind_names",
    "load",
    "load_engine",
    "load_kind",
    "local_ai",
    "local_functions",
]
