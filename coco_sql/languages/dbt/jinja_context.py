"""What a real project's Jinja calls, given by the validator's renderer: macros of the project, of its packages and
of dbt itself, and the parts of dbt's context that are pure (issue 39).

- **Macros** are compiled one by one (`MacroSet`), each called through a wrapper that implements dbt's
  ``{{ return(value) }}``. A model calls the project's macros by name (and under the project's name), a package's
  under the package's name (``dbt_utils.generate_surrogate_key``: the files of ``dbt_packages/<package>/macros``
  the program holds), and dbt's cross-database utilities (``dbt.hash``, ``dbt.dateadd``, ``dbt.type_string``: the
  files of ``macros/utils`` that dbt-core and dbt-duckdb install) under ``dbt`` or by name. Inside a package its
  own macros come first. ``adapter.dispatch(name, namespace)`` finds ``duckdb__name`` or ``default__name``,
  the root project's first. ``{% test %}`` and ``{% materialization %}`` blocks are not macros a model calls:
  they are left out.
- **Context**: ``target`` (a DuckDB target), ``this`` (refused when rendered: a run starts from an empty
  database), ``is_incremental()`` (false: every run is a full build), ``execute`` (true), ``log`` and
  ``exceptions.warn`` (nothing), ``exceptions.raise_compiler_error`` (a one-line rejection), ``api.Column``,
  ``modules.datetime``, ``zip``, ``tojson``, ``fromjson``, and ``statement`` / ``load_result`` /
  ``run_query`` for a query that reads no table (``dbt_utils.date_spine`` counts its intervals that way): it
  runs on an empty in-memory DuckDB under the sandbox's lock-down. Everything else (``env_var``,
  ``adapter.get_columns_in_relation``, ``graph``, ...) is undefined, and rendering it is a one-line error.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import ChainMap
from collections.abc import Callable, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.plugin_loader import SANDBOX_DIALECT, load_engine

_MACRO = re.compile(r"\{%-?\s*macro\s+([A-Za-z_]\w*)\s*\(.*?\{%-?\s*endmacro\s*-?%\}", re.S)
_BLOCKS = re.compile(r"\{%-?\s*(test|materialization|snapshot)\b.*?\{%-?\s*end\1\s*-?%\}", re.S)
_TYPES = {"string": "VARCHAR", "text": "VARCHAR", "varchar": "VARCHAR", "int": "INTEGER", "integer": "INTEGER",
          "bigint": "BIGINT", "float": "FLOAT", "double": "DOUBLE", "numeric": "NUMERIC", "boolean": "BOOLEAN",
          "timestamp": "TIMESTAMP", "date": "DATE"}  # fmt: skip
MAX_QUERY_ROWS = 10_000


class Return(Exception):
    def __init__(self, value: Any) -> None:
        self.value = value


def _return(value: Any = None) -> None:
    raise Return(value)


class MacroCall:
    """A compiled macro called as dbt calls one: ``{{ return(x) }}`` inside it gives x."""

    def __init__(self, macro: Any, name: str) -> None:
        self.macro, self.name = macro, name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.macro(*args, **kwargs)
        except Return as returned:
            return returned.value


class Namespace:
    """A package's macros as attributes (``dbt_utils.star``); a missing one is a one-line rejection."""

    def __init__(self, name: str, macros: Mapping[str, MacroCall]) -> None:
        self._name, self._macros = name, macros

    def __getattr__(self, name: str) -> MacroCall:
        if name.startswith("_") or name not in self._macros:
            raise CandidateRejected(f"{self._name}.{name} is not a macro of {self._name}")
        return self._macros[name]


def builtin_files() -> dict[str, str]:
    """dbt's cross-database utility macros as installed (dbt-core's, then dbt-duckdb's): path -> text; empty
    without dbt."""
    found: dict[str, str] = {}
    for package, folder in (
        ("dbt", "include/global_project/macros/utils"),
        ("dbt", "include/duckdb/macros/utils"),
    ):
        spec = find_spec(package)
        for root in spec.submodule_search_locations or [] if spec is not None else []:
            for path in sorted((Path(root) / folder).glob("*.sql")):
                found[f"{folder}/{path.name}"] = path.read_text(encoding="utf-8")
    return found


_BUILTINS: dict[str, str] | None = None


def _builtins() -> dict[str, str]:
    global _BUILTINS  # read once a process: the installed files do not change
    if _BUILTINS is None:
        _BUILTINS = builtin_files()
    return _BUILTINS


def without_blocks(text: str) -> str:
    """A macro file without its test, materialization and snapshot blocks (dbt's own tags, not macros)."""
    return _BLOCKS.sub("", text)


def macro_sources(text: str) -> dict[str, str]:
    """Each ``{% macro %}`` definition of a file (test, materialization and snapshot blocks left out)."""
    return {m.group(1): m.group(0) for m in _MACRO.finditer(without_blocks(text))}


_CODE: dict[tuple[type, str], Any] = {}  # (environment class, macro source) -> compiled code, a process's
_CODE_KEPT = 4096


class _Lazy(dict):  # type: ignore[type-arg]
    """Macros compiled when first looked up (a package holds a hundred; a model calls a few)."""

    def __init__(self, compile_one: Callable[[str], MacroCall | None], names: set[str]) -> None:
        super().__init__()
        self._compile, self._names = compile_one, names

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __missing__(self, name: str) -> MacroCall:
        if name not in self._names:
            raise KeyError(name)
        made = self._compile(name)
        if made is None:
            raise KeyError(name)
        self[name] = made
        return made

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        return self[name] if name in self._names else default


class MacroSet:
    """Every macro a render may call, compiled once per project (module docstring). `shared` holds what every
    template sees (the context and the namespaces); `bind` sets the current model's ref/source/config/var."""

    def __init__(
        self, env: Any, project: str, own: Mapping[str, str], packages: Mapping[str, Mapping[str, str]]
    ) -> None:
        self.env = env
        self.shared: dict[str, Any] = context_globals(self)
        self.namespaces: dict[str, dict[str, MacroCall]] = {}
        builtins = _Lazy(lambda name: None, set())
        self._compile("dbt", _builtins(), builtins, ChainMap(builtins, self.shared))
        self.namespaces["dbt"] = builtins
        for package, files in sorted(packages.items()):
            macros = _Lazy(lambda name: None, set())
            self._compile(package, files, macros, ChainMap(macros, builtins, self.shared))
            self.namespaces[package] = macros
        self.own = _Lazy(lambda name: None, set())
        self._compile(project, own, self.own, ChainMap(self.own, builtins, self.shared))
        self.namespaces[project] = self.own
        self.project = project
        for name, macros in self.namespaces.items():
            if name not in self.own:
                self.shared[name] = Namespace(name, macros)

    def _compile(self, namespace: str, files: Mapping[str, str], into: _Lazy, scope: Any) -> None:
        """Register `files`' macros in `into`, each compiled on first use in `scope` (code cached a process)."""
        sources = {name: (path, source) for path, text in sorted(files.items())
                   for name, source in macro_sources(text).items()}  # fmt: skip

        def compile_one(name: str) -> MacroCall:
            path, source = sources[name]
            try:
                key = (type(self.env), source)
                code = _CODE.get(key)
                if code is None:
                    code = _CODE[key] = self.env.compile(source)
                    if len(_CODE) > _CODE_KEPT:
                        _CODE.pop(next(iter(_CODE)))
                template = self.env.template_class.from_code(self.env, code, self.env.make_globals(scope))
                context = template.new_context(template.globals, shared=True)  # live: bind() reaches it
                for _ in template.root_render_func(context):  # defines the macro (a private one too)
                    pass
                return MacroCall(context.vars[name], f"{namespace}.{name}")
            except CandidateRejected:
                raise
            except Exception as error:  # a macro's Jinja does not compile: one line naming it
                raise CandidateRejected(f"{path}: macro {name}: {type(error).__name__}: {error}") from None

        into._compile, into._names = compile_one, set(sources)

    def globals(self) -> Mapping[str, Any]:
        """What a model's template sees: its project's macros by name, dbt's, then the context."""
        return ChainMap(self.own, self.namespaces["dbt"], self.shared)

    def bind(self, functions: Mapping[str, Callable[..., Any]]) -> None:
        self.shared.update(functions)

    def dispatch(self, name: str, macro_namespace: str | None = None, packages: Any = None) -> MacroCall:
        """dbt's ``adapter.dispatch``: ``duckdb__name`` or ``default__name``, the root project's first."""
        order = [self.project, macro_namespace or self.project, "dbt"]
        for candidate in (f"duckdb__{name}", f"default__{name}", name):
            for namespace in dict.fromkeys(order):
                found = self.namespaces.get(namespace, {}).get(candidate)
                if found is not None:
                    return found
        raise CandidateRejected(f"adapter.dispatch: no macro {name!r} in {macro_namespace or self.project}")


class _Adapter:
    def __init__(self, macros: MacroSet) -> None:
        self.dispatch = macros.dispatch

    def quote(self, name: str) -> str:
        return '"' + str(name).replace('"', '""') + '"'


class _Column:
    @staticmethod
    def translate_type(name: str) -> str:
        return _TYPES.get(str(name).lower(), str(name))


class _Api:
    Column = _Column


class _Target:
    """dbt's `target`: the sandbox's, whose `type` is the sandbox engine's dbt adapter (`SqlRules.dbt_adapter`)."""

    name, schema, database, profile_name, threads = "dev", "main", "memory", "coco", 1

    def __init__(self) -> None:
        self.type = load_engine(SANDBOX_DIALECT).sql.dbt_adapter


class _This:
    def __str__(self) -> str:
        raise CandidateRejected("{{ this }} names the model's own table, which a run builds from scratch")

    def __getattr__(self, name: str) -> Any:
        raise CandidateRejected("{{ this }} names the model's own table, which a run builds from scratch")


class _Exceptions:
    @staticmethod
    def raise_compiler_error(message: str = "") -> None:
        raise CandidateRejected(f"raise_compiler_error: {message}")

    @staticmethod
    def warn(message: str = "") -> str:
        return ""


class _Datetime:
    date, datetime, timedelta, timezone = dt.date, dt.datetime, dt.timedelta, dt.timezone


class _Modules:
    datetime = _Datetime


class _Queries:
    """``statement`` / ``load_result`` / ``run_query`` for queries that read no table."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}

    def statement(self, name: str = "main", fetch_result: bool = False, caller: Any = None, **_: Any) -> str:
        sql = str(caller()) if caller is not None else ""
        rows = run_constant(sql)
        self.results[name] = {"data": rows, "table": _Table(rows), "response": None}
        return ""

    def load_result(self, name: str) -> dict[str, Any] | None:
        return self.results.get(name)

    def run_query(self, sql: str) -> _Table:
        return _Table(run_constant(sql))


class _Table:
    """The little of agate's Table that macros read: rows, and each column's values."""

    def __init__(self, rows: list[tuple[Any, ...]]) -> None:
        self.rows = rows
        width = len(rows[0]) if rows else 0
        self.columns = [_Values([r[i] for r in rows]) for i in range(width)]


class _Values:
    def __init__(self, values: list[Any]) -> None:
        self._values = values

    def values(self) -> list[Any]:
        return list(self._values)


def run_constant(sql: str) -> list[tuple[Any, ...]]:
    """Rows of a query that reads no table (one SELECT), on an empty locked-down DuckDB; a one-line rejection
    for anything else."""
    from coco_sql.sandbox.lockdown import LOCKDOWN

    try:
        tree = sqlglot.parse_one(sql, read=SANDBOX_DIALECT)
    except sqlglot.errors.SqlglotError as error:
        raise CandidateRejected(
            f"a query run while rendering does not parse: {str(error).splitlines()[0]}"
        ) from None
    if not isinstance(tree, exp.Select) or any(True for _ in tree.find_all(exp.Table)):
        raise CandidateRejected("a query run while rendering may only compute constants (it reads no table)")
    with duckdb.connect(":memory:") as con:
        for statement in LOCKDOWN:
            con.execute(statement.format(memory_limit="256MB"))
        try:
            return con.execute(sql).fetchmany(MAX_QUERY_ROWS)
        except duckdb.Error as error:
            raise CandidateRejected(
                f"a query run while rendering failed: {str(error).splitlines()[0]}"
            ) from None


def context_globals(macros: MacroSet) -> dict[str, Any]:
    queries = _Queries()
    return {
        "return": _return,
        "is_incremental": lambda: False,
        "this": _This(),
        "target": _Target(),
        "execute": True,
        "log": lambda *args, **kwargs: "",
        "exceptions": _Exceptions(),
        "adapter": _Adapter(macros),
        "api": _Api(),
        "modules": _Modules(),
        "statement": queries.statement,
        "load_result": queries.load_result,
        "run_query": queries.run_query,
        "zip": zip,
        "tojson": lambda value, **_: json.dumps(value, sort_keys=True),
        "fromjson": lambda text, default=None: json.loads(text) if text else default,
    }
