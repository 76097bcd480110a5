"""The AI functions a candidate may call: one entry per SQL function, the source every other AI table uses.

An entry holds the SQL spelling(s), the parameters in Snowflake's order (which are optional, the names
accepted as ``name => value``), the DuckDB UDF a call binds to with its return type, and the name of the
:class:`~coco_sql.aifuncs.functions.AiFunctions` method that answers that UDF. Derived from it:

- ``sqlcheck.allowlist.AI_SIGNATURES``: parameter names and arities (validator, named-argument rewrite);
- ``sqlcheck.ai_binding.UDFS``: the UDF each SQL name binds to, padded to one JSON argument per parameter;
- ``aifuncs.duckdb_udfs``: the UDFs registered in every sandbox, their return types and implementations.

Facts Snowflake documents but we do not follow yet (documented argument names, value limits) have their own
fields (:attr:`Param.documented`, :attr:`Param.limits`, :attr:`AiFunction.note`), so matching the
documentation later is an edit of this table only (Snowflake's Cortex AISQL reference).

This module imports only the standard library (and never ``sqlcheck``, ``functions`` or ``runtime``), so
``sqlcheck`` reads it without an import cycle, and without loading DuckDB, arrow, a model or a socket.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

ParamKind = Literal["required", "optional", "variadic"]

MAX_UDF_ARITY = 5
"""The most parameters a UDF may take (``duckdb_udfs`` builds fixed-arity wrappers up to this many)."""


@dataclass(frozen=True)
class ReturnType:
    """What a UDF returns: its DuckDB type, the arrow type of its result column, and whether it is JSON."""

    duckdb: str  # the DuckDB type the UDF is declared with
    arrow: str  # a pyarrow type alias (``pyarrow.type_for_alias``), or ``list<alias>``
    json: bool = False  # JSON text: the binder casts the call to JSON, so SQL sees an object


TEXT = ReturnType("VARCHAR", "string")
JSON = ReturnType("VARCHAR", "string", json=True)
BOOLEAN = ReturnType("BOOLEAN", "bool")
DOUBLE = ReturnType("DOUBLE", "double")
INTEGER = ReturnType("INTEGER", "int32")
FLOAT_VECTOR = ReturnType("FLOAT[]", "list<float32>")


@dataclass(frozen=True)
class Param:
    """One parameter of an AI function, in Snowflake's position order."""

    name: str  # the name accepted in ``name => value`` (lower case)
    kind: ParamKind = "required"  # a variadic parameter takes zero or more trailing values
    documented: str = ""  # Snowflake's documented name, where it differs from ``name`` (not accepted yet)
    limits: str = ""  # documented limits on the value (not enforced yet)


@dataclass(frozen=True)
class Udf:
    """A DuckDB Python UDF taking one JSON parameter per parameter of its function; a method answers it."""

    name: str  # the function registered in DuckDB
    method: str  # the AiFunctions method answering it, looked up when the UDF is registered
    returns: ReturnType


@dataclass(frozen=True)
class AiFunction:
    """One AI function as SQL sees it, and how a call to it runs in DuckDB."""

    name: str  # upper case, as the validator reports it (dotted for the Cortex spellings)
    params: tuple[Param, ...]
    udf: Udf | None  # None: the binder rewrites the call itself (PROMPT builds an object)
    aggregate: bool = False  # an aggregate: the binder passes list(first argument) to a scalar UDF
    object_udf: Udf | None = None  # bound instead of `udf` when any parameter in `object_when` is given
    object_when: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # further SQL spellings of the same function
    note: str = ""  # where we knowingly differ from Snowflake's documentation

    def __post_init__(self) -> None:
        kinds = [p.kind for p in self.params]
        ordered = kinds == sorted(kinds, key=("required", "optional", "variadic").index)
        if not ordered or kinds.count("variadic") > 1:
            raise ValueError(f"{self.name}: required, then optional, then at most one variadic parameter")
        if self.udfs and ("variadic" in kinds or len(self.params) > MAX_UDF_ARITY):
            raise ValueError(f"{self.name}: a UDF takes a fixed number of at most {MAX_UDF_ARITY} parameters")
        switch_names_params = set(self.object_when) <= set(self.param_names)
        if not switch_names_params or bool(self.object_when) != (self.object_udf is not None):
            raise ValueError(f"{self.name}: object_when names parameters, and only with an object_udf")

    @property
    def sql_names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    @property
    def required(self) -> int:
        return sum(p.kind == "required" for p in self.params)

    @property
    def variadic(self) -> bool:
        return any(p.kind == "variadic" for p in self.params)

    @property
    def arity(self) -> tuple[int, int | None]:
        """(fewest, most) arguments a call may pass; most is None for a variadic function."""
        return (self.required, None if self.variadic else len(self.params))

    @property
    def udfs(self) -> tuple[Udf, ...]:
        return tuple(u for u in (self.udf, self.object_udf) if u is not None)

    def udf_for(self, given: Collection[str]) -> Udf:
        """The UDF a call binds to, given the names of the parameters it passes (not NULL)."""
        if self.udf is None:
            raise ValueError(f"{self.name} does not bind to a UDF")
        if self.object_udf is not None and any(name in given for name in self.object_when):
            return self.object_udf
        return self.udf


def _required(name: str, documented: str = "", limits: str = "") -> Param:
    return Param(name, "required", documented, limits)


def _optional(name: str, documented: str = "", limits: str = "") -> Param:
    return Param(name, "optional", documented, limits)


CATALOGUE: tuple[AiFunction, ...] = (
    AiFunction(
        "AI_COMPLETE",
        (
            _required("model"),
            _required("prompt"),
            _optional("model_parameters"),
            _optional("response_format"),
            _optional("show_details"),
        ),
        Udf("AI_COMPLETE", "complete_text", TEXT),
        object_udf=Udf("COCO_AI_COMPLETE_JSON", "complete_object", JSON),
        object_when=("response_format", "show_details"),
    ),
    AiFunction(
        "AI_CLASSIFY",
        (
            _required("input"),
            _required("categories", documented="list_of_categories"),
            _optional("config", documented="config_object"),
        ),
        Udf("AI_CLASSIFY", "classify", JSON),
    ),
    AiFunction(
        "AI_FILTER",
        (_required("input"), _optional("config")),
        Udf("AI_FILTER", "filter", BOOLEAN),
        note="Snowflake documents AI_FILTER(input) and AI_FILTER(predicate, file); `config` is ours.",
    ),
    AiFunction(
        "AI_EXTRACT",
        (_required("text"), _required("response_format")),
        Udf("AI_EXTRACT", "extract", JSON),
    ),
    AiFunction(
        "AI_SENTIMENT",
        (_required("text"), _optional("categories")),
        Udf("AI_SENTIMENT", "sentiment", JSON),
    ),
    AiFunction(
        "AI_AGG",
        (_required("expr"), _required("instruction", documented="task_description")),
        Udf("COCO_AI_AGG", "agg", TEXT),
        aggregate=True,
    ),
    AiFunction(
        "AI_SUMMARIZE_AGG",
        (_required("expr"),),
        Udf("COCO_AI_SUMMARIZE_AGG", "summarize_agg", TEXT),
        aggregate=True,
    ),
    AiFunction(
        "AI_SIMILARITY",
        (_required("input1"), _required("input2"), _optional("config")),
        Udf("AI_SIMILARITY", "similarity", DOUBLE),
    ),
    AiFunction(
        "AI_EMBED",
        (_required("model"), _required("input")),
        Udf("AI_EMBED", "embed", FLOAT_VECTOR),
    ),
    AiFunction(
        "AI_COUNT_TOKENS",
        (_required("function_name"), _required("model_name"), _optional("input")),
        Udf("AI_COUNT_TOKENS", "count_tokens", INTEGER),
        note="With two arguments the second is the input (no model); the implementation reads it from there.",
    ),
    AiFunction(
        "PROMPT",
        (_required("template"), Param("args", "variadic")),
        None,
        note="Rewritten by the binder into the object Snowflake's PROMPT returns: {template, args}.",
    ),
    AiFunction(
        "SNOWFLAKE.CORTEX.COMPLETE",
        (_required("model"), _required("prompt_or_history"), _optional("options")),
        Udf("COCO_CORTEX_COMPLETE", "cortex_complete", TEXT),
        note="Returns the text even with options (Snowflake then takes a history and returns a JSON string).",
    ),
    AiFunction(
        "SNOWFLAKE.CORTEX.CLASSIFY_TEXT",
        (_required("input"), _required("list_of_categories"), _optional("options")),
        Udf("COCO_CORTEX_CLASSIFY_TEXT", "cortex_classify_text", JSON),
    ),
    AiFunction(
        "SNOWFLAKE.CORTEX.SENTIMENT",
        (_required("text"),),
        Udf("COCO_CORTEX_SENTIMENT", "cortex_sentiment", DOUBLE),
    ),
)
"""Every AI function. None is allowed by default: a task enables them in its allowed_functions."""


def _by_name(catalogue: tuple[AiFunction, ...]) -> Mapping[str, AiFunction]:
    """SQL spelling -> entry, refusing a spelling or UDF name claimed twice."""
    names = [name for function in catalogue for name in function.sql_names]
    udfs = [udf.name for function in catalogue for udf in function.udfs]
    for kind, spellings in (("SQL name", names), ("UDF", udfs)):
        twice = sorted({n for n in spellings if spellings.count(n) > 1})
        if twice:
            raise ValueError(f"{kind} {', '.join(twice)} appears twice in the AI catalogue")
    return MappingProxyType({name: function for function in catalogue for name in function.sql_names})


BY_NAME: Mapping[str, AiFunction] = _by_name(CATALOGUE)
"""Every SQL spelling (upper case) -> its entry."""


def bound_udfs() -> Iterator[tuple[Udf, int]]:
    """Every UDF a call can bind to, with its arity (one JSON parameter per parameter of its function)."""
    for function in CATALOGUE:
        for udf in function.udfs:
            yield udf, len(function.params)
