"""Render a project's models with our own sandboxed Jinja, instead of asking dbt to compile them.

Why not ``dbt compile``: dbt's Jinja context is a programming environment over the warehouse. ``run_query``,
``statement`` blocks, ``adapter``, hooks, ``env_var``, ``modules``, ``load_result`` and custom materializations
all execute SQL or read the host at compile time, before any validator could look at the SQL; and a compile
costs a full parse of dbt's ~1,000 built-in macros (2 s warm, 5 s cold; `bench/bench_dbt_sandbox.py`).
Rendering here takes milliseconds and offers a model exactly what the validator can vouch for:

- ``ref('model')`` and ``source('source', 'table')``, rendered as placeholder relation names that
  `validate` maps back, so the sqlglot checks see every relation a model reads;
- ``config(materialized=..., tags=..., enabled=...)``, recorded and rendered as nothing;
- ``var('name', default)`` over the scalar ``vars`` of dbt_project.yml;
- the project's own macros (``macros/*.sql``), which hold ``{% macro %}`` definitions only;
- plain Jinja: set, for, if, macro, call, filter, do, loop controls, and the sandbox's safe builtins.

Every other name is refused before rendering, by a static walk of the template (`jinja2.meta`), so a branch
that this rendering does not take cannot hide a call either; include, import and extends are refused the same
way. The environment is Jinja's sandbox (as dbt's own is) with its work counted and its values bounded
(`jinja_sandbox`: loops without calls count too), since the template is hostile.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import jinja2
import jinja2.meta
import jinja2.nodes

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.jinja_context import MacroSet, without_blocks
from coco_sql.languages.dbt.jinja_sandbox import INSTRUMENT_GLOBALS, BoundedEnvironment, bounded_environment
from coco_sql.languages.dbt.project import DbtProject

REF_PREFIX = "__coco_ref_"
SOURCE_PREFIX = "__coco_src_"
MATERIALIZATIONS = ("table", "view", "ephemeral")
HOOKS = frozenset({"pre_hook", "post_hook", "sql_header"})
REFUSED_MATERIALIZATIONS = frozenset({"external", "snapshot", "seed", "test", "function"})
SEEDS = "dbt_seeds"  # the source a seed's ``ref('name')`` reads: the task holds the seeds as its sources
CONFIG_KEYS = ("materialized", "tags", "enabled")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MAX_OUTPUT_CHARS = 1_000_000
_SAFE_GLOBALS = (
    frozenset({"range", "dict", "namespace", "loop", "caller", "varargs", "kwargs"}) | INSTRUMENT_GLOBALS
)
PROJECT_GLOBALS = frozenset({"ref", "source", "config", "var"})
_JINJA = ("{{", "{%", "{#")


@dataclass(frozen=True)
class RenderedModel:
    """One model after rendering: SQL with placeholder relations, what it reads, and its config() call."""

    name: str
    path: str
    sql: str
    refs: Mapping[str, str] = field(hash=False)  # placeholder -> model name
    sources: Mapping[str, tuple[str, str]] = field(hash=False)  # placeholder -> (source, table)
    config: Mapping[str, Any] = field(hash=False)

    def relation_label(self, placeholder: str) -> str:
        """How a placeholder reads in a message: ``ref('orders')`` or ``source('shop', 'orders')``."""
        if placeholder in self.refs:
            return f"ref('{self.refs[placeholder]}')"
        if placeholder in self.sources:
            source, table = self.sources[placeholder]
            return f"source('{source}', '{table}')"
        return placeholder


def _environment() -> BoundedEnvironment:
    return bounded_environment()


# --------------------------------------------------------------------------------------------- static checks


def _parse(env: jinja2.Environment, source: str, where: str) -> jinja2.nodes.Template:
    try:
        return env.parse(source)
    except jinja2.TemplateSyntaxError as error:
        raise CandidateRejected(f"{where} line {error.lineno}: Jinja syntax error: {error.message}") from None


def _check_names(tree: jinja2.nodes.Template, where: str, allowed: Iterable[str]) -> None:
    """Every free name the template can reach, on any branch, is one we provide."""
    for node in tree.find_all((jinja2.nodes.Include, jinja2.nodes.Import, jinja2.nodes.FromImport)):
        raise CandidateRejected(
            f"{where} line {node.lineno}: {type(node).__name__.lower()} is not allowed; put shared Jinja in "
            "macros/*.sql"
        )
    for node in tree.find_all(jinja2.nodes.Extends):
        raise CandidateRejected(f"{where} line {node.lineno}: extends is not allowed")
    # A free name the renderer does not provide is undefined (`jinja_context`): rendering it is a one-line error,
    # testing it (`x is defined`) is false. Nothing of the template reaches dbt (`run_form`), so a name on a
    # branch this rendering does not take can run nowhere.


def macro_names(project: DbtProject) -> dict[str, str]:
    """Macro name -> the file that defines it, after checking each macro file holds only macro definitions."""
    env = _environment()
    names: dict[str, str] = {}
    trees = {
        path: _parse(env, without_blocks(project.files[path]), path)
        for path in project.paths("macros/", ".sql")
    }
    for path, tree in trees.items():
        for node in tree.body:
            if isinstance(node, jinja2.nodes.Macro):
                if node.name in names or node.name in PROJECT_GLOBALS:
                    raise CandidateRejected(
                        f"{path} line {node.lineno}: macro {node.name!r} is defined twice or shadows a built-in"
                    )
                names[node.name] = path
            elif not _is_blank(node):
                raise CandidateRejected(
                    f"{path} line {node.lineno}: a macro file may hold only {{% macro %}} definitions"
                )
    for path, tree in trees.items():
        _check_names(tree, path, PROJECT_GLOBALS | set(names))
    return names


def _is_blank(node: jinja2.nodes.Node) -> bool:
    return isinstance(node, jinja2.nodes.Output) and all(
        isinstance(child, jinja2.nodes.TemplateData) and not child.data.strip() for child in node.nodes
    )


# ------------------------------------------------------------------------------------------------- rendering


@dataclass
class _Calls:
    """What one model's rendering called: filled by the functions handed to the template."""

    models: frozenset[str]
    declared_sources: frozenset[tuple[str, str]]
    variables: Mapping[str, Any]
    refs: dict[str, str] = field(default_factory=dict)
    sources: dict[str, tuple[str, str]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    def ref(self, *args: Any, **kwargs: Any) -> str:
        if (
            not 1 <= len(args) <= 2
            or set(kwargs) - {"version", "v"}
            or not all(isinstance(a, str) for a in args)
        ):
            raise CandidateRejected(
                "ref() takes a model name, e.g. ref('stg_orders') (or a package and a name)"
            )
        name = args[
            -1
        ]  # ref('package', 'model'): the project's models are one namespace; a version is the model
        if name not in self.models and (SEEDS, name) in self.declared_sources:  # a seed: a source of the task
            return self._placeholder(SOURCE_PREFIX, self.sources, (SEEDS, name))
        if name not in self.models:
            known = ", ".join(sorted(self.models)) or "none"
            raise CandidateRejected(f"ref('{name}') names no model of the project (models: {known})")
        return self._placeholder(REF_PREFIX, self.refs, name)

    def source(self, *args: Any, **kwargs: Any) -> str:
        if len(args) != 2 or kwargs or not all(isinstance(a, str) for a in args):
            raise CandidateRejected(
                "source() takes a source name and a table name, e.g. source('shop', 'orders')"
            )
        target = (args[0], args[1])
        if target not in self.declared_sources:
            known = ", ".join(f"{s}.{t}" for s, t in sorted(self.declared_sources)) or "none"
            raise CandidateRejected(
                f"source('{args[0]}', '{args[1]}') is not declared in a models/*.yml file (declared: {known})"
            )
        return self._placeholder(SOURCE_PREFIX, self.sources, target)

    def _placeholder(self, prefix: str, seen: dict[str, Any], target: Any) -> str:
        for placeholder, known in seen.items():
            if known == target:
                return placeholder
        placeholder = f"{prefix}{len(self.refs) + len(self.sources)}"
        seen[placeholder] = target
        return placeholder

    def configure(self, *args: Any, **kwargs: Any) -> str:
        if args and not (len(args) == 1 and isinstance(args[0], dict)):
            raise CandidateRejected(
                "config() takes keyword arguments only, e.g. config(materialized='table')"
            )
        given = {**(args[0] if args else {}), **kwargs}
        for key, value in given.items():
            check_config(key, value)
        self.config.update({k: v for k, v in given.items() if k in CONFIG_KEYS})
        return ""

    def config_get(self, key: str, default: Any = None) -> Any:
        return self.config.get(key, default)

    def var(self, name: Any, *default: Any) -> Any:
        if name in self.variables:
            return self.variables[name]
        if default:
            return default[0]
        raise CandidateRejected(f"var('{name}') has no value in dbt_project.yml vars and no default")


def check_config(key: str, value: Any) -> None:
    """A model config a program may set; shared by config() calls and dbt_project.yml (`yaml_check`). Keys other
    than `CONFIG_KEYS` (schema, alias, docs, unique_key, incremental_strategy, hooks...) are accepted and never
    reach dbt: the run form writes only the effective materialization and enabled (`run_form`), relations are
    the validator's own, and a hook is not run. A materialization other than view and ephemeral (incremental,
    materialized_view, external...) runs as a table: every run builds from an empty database."""
    if key.replace("-", "_") in HOOKS:
        raise CandidateRejected(
            f"config key {key!r} is not allowed: a hook runs SQL outside the model's SELECT, which coco-sql does "
            "not check or score (remove it for the task; your project keeps it)"
        )
    if key not in CONFIG_KEYS:
        return
    if key == "materialized" and (not isinstance(value, str) or value in REFUSED_MATERIALIZATIONS):
        raise CandidateRejected(
            f"materialized={value!r} is not allowed; it acts outside the model's SELECT (use table, view, "
            "ephemeral or incremental)"
        )
    if key == "enabled" and not isinstance(value, bool):
        raise CandidateRejected(f"enabled must be true or false, got {value!r}")
    if key == "tags" and not (
        isinstance(value, str) or (isinstance(value, list) and all(isinstance(t, str) for t in value))
    ):
        raise CandidateRejected(f"tags must be a string or a list of strings, got {value!r}")
    if key == "tags" and any(
        d in tag for tag in ([value] if isinstance(value, str) else value) for d in _JINJA
    ):
        raise CandidateRejected("tags may not hold Jinja ({{, {% or {#): dbt would render it")


def render_models(
    project: DbtProject,
    *,
    declared_sources: Iterable[tuple[str, str]],
    variables: Mapping[str, Any] | None = None,
    deadline_s: float = 5.0,
    project_name: str = "project",
) -> dict[str, RenderedModel]:
    """Render every model of `project`; model name -> `RenderedModel`. Raises `CandidateRejected` naming the file.
    Macros (the project's, its packages', dbt's own) and dbt's pure context come from `jinja_context`."""
    env = _environment()
    env.start(deadline_s)
    macros = macro_names(project)
    own = {p: project.files[p] for p in project.paths("macros/", ".sql")}
    macro_set = MacroSet(env, project_name, own, project.packages())
    models = project.models()
    for name, path in models.items():
        if not _IDENTIFIER.fullmatch(name):
            raise CandidateRejected(
                f"{path}: model name {name!r} must be a plain identifier (letters, digits, _)"
            )
    duplicates = [p for p in project.paths("models/", ".sql") if models[_stem(p)] != p]
    if duplicates:
        raise CandidateRejected(f"{duplicates[0]}: a model named {_stem(duplicates[0])!r} exists twice")
    rendered: dict[str, RenderedModel] = {}
    for name, path in models.items():
        text = project.files[path]
        if REF_PREFIX in text or SOURCE_PREFIX in text:
            raise CandidateRejected(
                f"{path}: names starting with {REF_PREFIX!r} or {SOURCE_PREFIX!r} are reserved"
            )
        _check_names(_parse(env, text, path), path, PROJECT_GLOBALS | set(macros))
        calls = _Calls(
            frozenset(models), frozenset(declared_sources), MappingProxyType(dict(variables or {}))
        )
        sql = _render(env, text, calls, path, macro_set)
        rendered[name] = RenderedModel(name, path, sql, calls.refs, calls.sources, calls.config)
    return rendered


class _Config:
    """dbt's ``config``: called (``config(materialized='table')``) or read (``config.get('materialized')``)."""

    def __init__(self, calls: _Calls) -> None:
        self._calls = calls

    def __call__(self, *args: Any, **kwargs: Any) -> str:
        return self._calls.configure(*args, **kwargs)

    def get(self, key: str, default: Any = None) -> Any:
        return self._calls.config_get(key, default)

    def require(self, key: str) -> Any:
        if key not in self._calls.config:
            raise CandidateRejected(f"config.require('{key}'): the model sets no {key}")
        return self._calls.config[key]


def _stem(path: str) -> str:
    return path.rsplit("/", 1)[-1].removesuffix(".sql")


def _render(env: BoundedEnvironment, text: str, calls: _Calls, path: str, macros: MacroSet) -> str:
    """Render one model within the deadline; the macros see the same ref/source/config/var as the model."""

    def where(lineno: int | None) -> str:
        return path if lineno is None else f"{path} line {lineno}"

    config = _Config(calls)
    macros.bind({"ref": calls.ref, "source": calls.source, "config": config, "var": calls.var})
    try:
        template = env.from_string(text, globals=macros.globals())
        chunks: list[str] = []
        size = 0
        context = template.new_context(template.globals, shared=True)  # live globals: macros compile on use
        for chunk in template.root_render_func(context):
            size += len(chunk)
            if size > _MAX_OUTPUT_CHARS:
                raise CandidateRejected(f"{path}: renders to more than {_MAX_OUTPUT_CHARS} characters")
            if time.monotonic() > env.deadline:
                raise CandidateRejected(f"{path}: rendering took longer than its deadline")
            chunks.append(chunk)
    except CandidateRejected as error:
        message = str(error)
        raise CandidateRejected(message if message.startswith(path) else f"{path}: {message}") from None
    except jinja2.TemplateSyntaxError as error:
        raise CandidateRejected(f"{where(error.lineno)}: Jinja syntax error: {error.message}") from None
    except RecursionError:
        raise CandidateRejected(f"{path}: rendering failed: macros or blocks nested too deeply") from None
    except Exception as error:  # the template is hostile: any failure is the candidate's
        raise CandidateRejected(f"{path}: rendering failed: {type(error).__name__}: {error}") from None
    sql = "".join(chunks)
    if "\x00" in sql:
        raise CandidateRejected(f"{path}: renders a NUL character; a model is text")
    return sql
