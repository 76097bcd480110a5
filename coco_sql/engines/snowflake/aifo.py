"""Snowflake's AI-function optimizer, as its documents define it: the AI_FUNCTION_OPTIMIZATION specification, the
CREATE AI FUNCTION statement, and the experiment statements around them.

Pages: "Optimize an AI function (AI_FUNCTION_OPTIMIZATION)", "EXPERIMENT (CREATE / EXECUTE / SHOW / DROP)",
"CREATE AI FUNCTION", "Evaluate an AI function" (public preview, read in 2026). What they say, and what is
written here:

- The specification is YAML: `function` (exactly one of `function_name`, "db.schema.fn(ARG_TYPES)", naming a
  CREATE AI FUNCTION object, or `function_body`, an inline SQL expression), `metrics` (exactly one: a mapping or
  a one-element list; `name` one of exact_match, fuzzy_match, contains_match, redaction_match, llm_judge
  (optional `judge_model`), custom (`custom_udf` required)), `dataset` (`name` and `version` of a versioned
  SNOWFLAKE.ML.DATASET, optional `column_mapping` with `argument_mapping` {function argument or `$1`, `$2`, ...:
  dataset column} and `ground_truth`) and `optimization` (`models`: 1 to 5 candidate models, each searched on
  its own; `reflection_model`, required; `strategy`: quality_first (default) | balanced | cost_first; `budget`:
  auto (= light) | ultra-light | light | medium | heavy, about 4-6, 10-15, 18-27, 27-40 proposal iterations per
  model). Unknown or misspelled keys are rejected at CREATE EXPERIMENT, and `mode`, `optimize_mode`,
  `validation_fraction` by name: so are they here, each in one line naming the key.
- The optimizer tunes exactly one AI_COMPLETE call (the function calls it once, every candidate calls it once),
  by rewriting its prompt and choosing among the models, on a quality/cost frontier.
- CREATE AI FUNCTION name(arg type, ...) RETURNS type [COMMENT = '...'] AS $$ <one scalar SQL expression> $$, or
  ... FROM EXPERIMENT <experiment> RUN <run> (the run's tuned body; the signature and return type must match).
  The body calls a scalar AI function at least once (the page's Arguments say AI_COMPLETE; its usage notes
  accept AI_CLASSIFY and the other AI_-prefixed scalar functions); the SNOWFLAKE.CORTEX.* spellings do not count
  and AI_AGG is refused. A TABLE return type is refused.

sqlglot (30.x) reads neither CREATE AI FUNCTION nor CREATE EXPERIMENT (it falls back to a Command), so each
statement is read here with a small grammar, and what sits inside it (the body, the types) is parsed by sqlglot
in Snowflake's dialect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from coco_sql.errors import TaskError

EXPERIMENT_TYPE = "AI_FUNCTION_OPTIMIZATION"
METRICS = ("exact_match", "fuzzy_match", "contains_match", "redaction_match", "llm_judge", "custom")
STRATEGIES = ("quality_first", "balanced", "cost_first")
BUDGETS: Mapping[str, tuple[int, int]] = {  # proposal iterations per candidate model
    "ultra-light": (4, 6),
    "light": (10, 15),
    "medium": (18, 27),
    "heavy": (27, 40),
}
MAX_MODELS = 5
MAX_SPEC_BYTES = 100_000
REFUSED_KEYS = ("mode", "optimize_mode", "validation_fraction")  # refused by name (the page's Limitations)
_KEYS: Mapping[str, tuple[str, ...]] = {
    "": ("function", "metrics", "dataset", "optimization"),
    "function": ("function_name", "function_body"),
    "metrics": ("name", "judge_model", "custom_udf"),
    "dataset": ("name", "version", "column_mapping"),
    "dataset.column_mapping": ("argument_mapping", "ground_truth"),
    "optimization": ("models", "reflection_model", "strategy", "budget"),
}
NOT_SCALAR_AI = frozenset({"AI_AGG", "AI_SUMMARIZE_AGG"})


@dataclass(frozen=True)
class OptimizationSpec:
    """An AI_FUNCTION_OPTIMIZATION specification, every documented field (module docstring)."""

    function_name: str | None
    function_body: str | None
    metric: str
    dataset: str
    version: str
    argument_mapping: tuple[tuple[str, str], ...] = ()
    ground_truth: str | None = None
    models: tuple[str, ...] = ()
    reflection_model: str = ""
    strategy: str = "quality_first"
    budget: str = "auto"
    judge_model: str | None = None
    custom_udf: str | None = None

    @property
    def iterations(self) -> tuple[int, int]:
        """The proposal iterations per candidate model the budget stands for (auto: light)."""
        return BUDGETS.get(self.budget, BUDGETS["light"])

    @property
    def signature(self) -> tuple[str, tuple[str, ...]] | None:
        """`function_name` split into the name and its argument types, or None for a `function_body`."""
        if self.function_name is None:
            return None
        match = re.fullmatch(r"\s*([^()\s]+)\s*\((.*)\)\s*", self.function_name, re.S)
        if match is None:
            raise _error("function.function_name", "must be db.schema.fn(ARG_TYPES), e.g. db.sch.fn(VARCHAR)")
        return match.group(1), tuple(_normal_type(t) for t in split_top_level(match.group(2)) if t.strip())


@dataclass(frozen=True)
class AiFunctionDefinition:
    """A CREATE AI FUNCTION statement: name, arguments (name, type), return type, body (a SQL expression)."""

    name: str
    arguments: tuple[tuple[str, str], ...]
    returns: str
    body: str

    @property
    def argument_types(self) -> tuple[str, ...]:
        return tuple(_normal_type(t) for _, t in self.arguments)


def parse_spec(text: str) -> OptimizationSpec:
    """The specification written in `text` (YAML), or a one-line TaskError naming the key that is wrong."""
    document = _load_yaml(text)
    _check_keys(document, "")
    function = _mapping(document, "function", required=True)
    _check_keys(function, "function")
    name, body = function.get("function_name"), function.get("function_body")
    if (name is None) == (body is None):
        raise _error("function", "give exactly one of function_name and function_body")
    metrics = document.get("metrics")
    if isinstance(metrics, list):
        if len(metrics) != 1:
            raise _error("metrics", f"exactly one metric (got {len(metrics)})")
        metrics = metrics[0]
    if not isinstance(metrics, dict):
        raise _error("metrics", "required: a metric, e.g. - name: exact_match")
    _check_keys(metrics, "metrics")
    metric = _choice(metrics, "metrics.name", METRICS)
    if metrics.get("judge_model") is not None and metric != "llm_judge":
        raise _error("metrics.judge_model", "only with llm_judge")
    if metric == "custom" and not isinstance(metrics.get("custom_udf"), str):
        raise _error("metrics.custom_udf", "required with the custom metric")
    dataset = _mapping(document, "dataset", required=True)
    _check_keys(dataset, "dataset")
    mapping = _mapping(dataset, "column_mapping", where="dataset.column_mapping")
    _check_keys(mapping, "dataset.column_mapping")
    arguments = _mapping(mapping, "argument_mapping", where="dataset.column_mapping.argument_mapping")
    for key, value in arguments.items():
        if not isinstance(value, str):
            raise _error(f"dataset.column_mapping.argument_mapping.{key}", "must name a dataset column")
    optimization = _mapping(document, "optimization", required=True)
    _check_keys(optimization, "optimization")
    models = optimization.get("models")
    if not isinstance(models, list) or not models or not all(isinstance(m, str) and m for m in models):
        raise _error("optimization.models", "required: a list of one or more candidate models")
    if len(models) > MAX_MODELS:
        raise _error("optimization.models", f"at most {MAX_MODELS} candidate models (got {len(models)})")
    return OptimizationSpec(
        function_name=_text(function, "function.function_name", name),
        function_body=_text(function, "function.function_body", body),
        metric=metric,
        dataset=_string(dataset, "dataset.name", required=True),
        version=str(_scalar(dataset, "dataset.version")),
        argument_mapping=tuple((str(k), str(v)) for k, v in arguments.items()),
        ground_truth=_string(mapping, "dataset.column_mapping.ground_truth"),
        models=tuple(dict.fromkeys(models)),
        reflection_model=_string(optimization, "optimization.reflection_model", required=True),
        strategy=_choice(optimization, "optimization.strategy", STRATEGIES, "quality_first"),
        budget=_choice(optimization, "optimization.budget", ("auto", *BUDGETS), "auto"),
        judge_model=_string(metrics, "metrics.judge_model"),
        custom_udf=_string(metrics, "metrics.custom_udf"),
    )


def parse_ai_function(text: str) -> AiFunctionDefinition:
    """A `CREATE [OR REPLACE] AI FUNCTION [IF NOT EXISTS] name(arg type, ...) RETURNS type [COMMENT = '...']
    AS $$ expression $$` statement, or a one-line TaskError. (FROM EXPERIMENT has no body to read.)"""
    match = re.fullmatch(
        r"\s*CREATE\s+(?:OR\s+REPLACE\s+)?AI\s+FUNCTION\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>[^\s(]+)\s*"
        r"\((?P<args>[^$]*?)\)\s*RETURNS\s+(?P<returns>[^$]+?)\s+(?:(?:WITH\s+)?COMMENT\s*=\s*'(?:[^']|'')*'\s+)?"
        r"AS\s+\$\$(?P<body>.*?)\$\$\s*;?\s*",
        text,
        re.S | re.I,
    )
    if match is None:
        raise TaskError(
            "the AI function's definition must be one CREATE AI FUNCTION name(arg TYPE, ...) RETURNS TYPE AS "
            "$$ <expression> $$ statement"
        )
    arguments = []
    for part in split_top_level(match.group("args")):
        if not part.strip():
            continue
        pieces = part.split(None, 1)
        if len(pieces) != 2 or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", pieces[0]):
            raise TaskError(f"the AI function's argument {part.strip()!r} is not `name TYPE`")
        arguments.append((pieces[0], _normal_type(pieces[1])))
    returns = _normal_type(match.group("returns"))
    if returns.startswith("TABLE"):
        raise TaskError("an AI function returns a scalar type, not TABLE(...) (CREATE AI FUNCTION)")
    body = match.group("body").strip()
    scalar_expression(body, "the AI function's body")
    return AiFunctionDefinition(match.group("name"), tuple(arguments), returns, body)


def scalar_expression(text: str, what: str) -> exp.Expression:
    """`text` parsed as one scalar SQL expression of Snowflake's, or a one-line TaskError about `what`."""
    try:
        tree = sqlglot.parse_one(text, read="snowflake")
    except SqlglotError as error:
        raise TaskError(f"{what} does not parse as Snowflake SQL: {str(error).splitlines()[0]}") from None
    if isinstance(tree, exp.Query | exp.Command) or tree is None:
        raise TaskError(f"{what} must be one scalar SQL expression, not a statement or a query")
    return tree


def body_problems(body: str) -> list[str]:
    """Why Snowflake would refuse `body` as an AI function's body (module docstring); empty when it would take
    it. A body without AI_COMPLETE is taken by the usage notes and refused by the Arguments section: that is a
    problem only `strict` callers report (`complete_missing`)."""
    try:
        tree = scalar_expression(body, "the body")
    except TaskError as error:
        return [str(error)]
    names = {_call_name(node) for node in tree.find_all(exp.Func)} - {""}
    problems = [
        f"{name} is an aggregate, which an AI function's body may not call" for name in NOT_SCALAR_AI & names
    ]
    if any(isinstance(node, exp.Subquery | exp.Query) for node in tree.walk()):
        problems.append("the body reads a table (a subquery): an AI function's body is one scalar expression")
    scalar = {n for n in names if n.startswith("AI_") and n not in NOT_SCALAR_AI and n != "AI_COUNT_TOKENS"}
    if not scalar:
        problems.append("the body calls no scalar AI function (AI_COMPLETE, AI_CLASSIFY, ...), which it must")
    return problems


def complete_missing(body: str) -> bool:
    """True when `body` calls no AI_COMPLETE (which the optimizer tunes, and the Arguments section requires)."""
    try:
        tree = scalar_expression(body, "the body")
    except TaskError:
        return False
    return "AI_COMPLETE" not in {_call_name(node) for node in tree.find_all(exp.Func)}


def create_ai_function(
    name: str, arguments: Sequence[tuple[str, str]], returns: str, body: str, comment: str | None = None
) -> str:
    """The CREATE OR REPLACE AI FUNCTION statement, its body checked (`body_problems`: a TaskError on the first)."""
    problems = body_problems(body)
    if problems:
        raise TaskError(f"not an AI function's body: {problems[0]}")
    if "$$" in body:
        raise TaskError("an AI function's body is quoted with $$, which this body contains")
    quoted = f"\n  COMMENT = '{comment.replace(chr(39), chr(39) * 2)}'" if comment else ""
    text = (
        f"CREATE OR REPLACE AI FUNCTION {name}({_arguments(arguments)})\n  RETURNS {returns}{quoted}\n"
        f"  AS $$\n{body}\n  $$;\n"
    )
    parsed = parse_ai_function(text)  # what we wrote reads back as written
    if parsed.body != body.strip() or parsed.returns != _normal_type(returns):
        raise TaskError("the AI function's statement does not read back as written")
    return text


def create_from_experiment(
    name: str, arguments: Sequence[tuple[str, str]], returns: str, experiment: str, run: str
) -> str:
    """CREATE OR REPLACE AI FUNCTION ... FROM EXPERIMENT <experiment> RUN <run>: an optimization run promoted."""
    for part, what in ((experiment, "experiment"), (run, "run")):
        if not re.fullmatch(r"[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*){0,2}", part):
            raise TaskError(f"the {what} {part!r} is not a Snowflake identifier")
    return (
        f"CREATE OR REPLACE AI FUNCTION {name}({_arguments(arguments)})\n  RETURNS {returns}\n"
        f"  FROM EXPERIMENT {experiment} RUN {run};\n"
    )


def create_experiment(experiment: str, spec_text: str, kind: str = EXPERIMENT_TYPE) -> str:
    """CREATE OR REPLACE EXPERIMENT ... TYPE = '<kind>' FROM SPECIFICATION $$ spec $$; then EXECUTE EXPERIMENT."""
    if "$$" in spec_text:
        raise TaskError("the specification is quoted with $$, which it contains")
    return (
        f"CREATE OR REPLACE EXPERIMENT {experiment}\n  TYPE = '{kind}'\n  FROM SPECIFICATION $$\n"
        f"{spec_text.strip()}\n$$;\n\nEXECUTE EXPERIMENT {experiment};\n"
    )


def evaluation_spec(query_text: str, metric: str, dataset: str, version: str, ground_truth: str) -> str:
    """The AI_FUNCTION_EVALUATION specification of `query_text` on a dataset version, scored by `metric`
    ("Evaluate an AI function"). Strings are written as JSON strings, which YAML reads as they are."""
    q = json.dumps
    return (
        f"query_text: {q(query_text)}\nmetrics:\n  - name: {q(metric)}\ndataset:\n  name: {q(dataset)}\n"
        f"  version: {q(version)}\n  ground_truth: {q(ground_truth)}\n"
    )


def split_top_level(text: str) -> list[str]:
    """`text` split on the commas outside parentheses (`NUMBER(10, 2)` stays one type)."""
    parts, depth, current = [], 0, ""
    for char in text:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


# -- internals -------------------------------------------------------------------------------------------------
def _arguments(arguments: Sequence[tuple[str, str]]) -> str:
    for argument, kind in arguments:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", argument):
            raise TaskError(f"the AI function's argument {argument!r} is not a Snowflake identifier")
        _normal_type(kind)
    return ", ".join(f"{argument} {kind}" for argument, kind in arguments)


def _normal_type(text: str) -> str:
    """A Snowflake type as sqlglot writes it back (VARCHAR, NUMBER(10, 2), ...), or a one-line TaskError."""
    try:
        return exp.DataType.build(text.strip(), dialect="snowflake").sql(dialect="snowflake")
    except (SqlglotError, ValueError):
        raise TaskError(f"{text.strip()!r} is not a Snowflake data type") from None


def _call_name(node: exp.Expression) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    if isinstance(node.parent, exp.Dot) and node.arg_key == "expression":
        return ""  # SNOWFLAKE.CORTEX.X: not an AI_-prefixed function
    names = [n.upper() for n in node.sql_names()] if isinstance(node, exp.Func) else []
    return next((n for n in names if n.startswith("AI_")), names[0] if names else "")


def _load_yaml(text: object) -> dict[str, Any]:
    if not isinstance(text, str):
        raise TaskError(
            f"the AI_FUNCTION_OPTIMIZATION specification is YAML text (got {type(text).__name__})"
        )
    if len(text.encode("utf-8")) > MAX_SPEC_BYTES:
        raise TaskError(f"the specification is over {MAX_SPEC_BYTES:,} bytes")
    try:
        import yaml
    except ImportError:  # pragma: no cover - PyYAML comes with the dev and dbt extras
        raise TaskError("reading a specification needs PyYAML: pip install pyyaml") from None

    class Loader(yaml.SafeLoader):  # no aliases (no exponential expansion), no key twice
        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise TaskError("the specification may not use YAML anchors and aliases (*name)")
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            keys = [key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
            twice = sorted({k for k in keys if keys.count(k) > 1})
            if twice:
                raise TaskError(f"the specification has the key {twice[0]!r} twice")
            return super().construct_mapping(node, deep)

    try:
        document = yaml.load(text, Loader=Loader)  # a SafeLoader subclass
    except yaml.YAMLError as error:
        raise TaskError(f"the specification is not valid YAML: {str(error).splitlines()[0]}") from None
    if not isinstance(document, dict):
        raise TaskError("the specification must be a YAML mapping (function, metrics, dataset, optimization)")
    return document


def _error(key: str, problem: str) -> TaskError:
    return TaskError(f"AI_FUNCTION_OPTIMIZATION spec: {key}: {problem}")


def _check_keys(table: Mapping[str, Any], where: str) -> None:
    for key in table:
        path = f"{where}.{key}" if where else str(key)
        if key in REFUSED_KEYS:
            raise _error(path, "is not supported by AI_FUNCTION_OPTIMIZATION (Snowflake refuses it)")
        if key not in _KEYS[where]:
            known = ", ".join(_KEYS[where])
            raise _error(path, f"unknown key (Snowflake rejects unknown keys; known here: {known})")


def _mapping(
    table: Mapping[str, Any], key: str, *, required: bool = False, where: str | None = None
) -> dict[str, Any]:
    value = table.get(key)
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise _error(where or key, "required: a mapping" if value is None else "must be a mapping")
    return value


def _scalar(table: Mapping[str, Any], key: str) -> Any:
    value = table.get(key.rsplit(".", 1)[-1])
    if value is None or isinstance(value, dict | list):
        raise _error(key, "required: a value, e.g. v1")
    return value


def _string(table: Mapping[str, Any], key: str, *, required: bool = False) -> str | None:
    value = table.get(key.rsplit(".", 1)[-1])
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _error(key, "required: a name" if value is None else "must be a string")
    return value.strip()


def _text(table: Mapping[str, Any], key: str, value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _error(key, "must be a string")
    return value.strip()


def _choice(table: Mapping[str, Any], key: str, choices: Sequence[str], default: str | None = None) -> str:
    value = table.get(key.rsplit(".", 1)[-1], default)
    if value not in choices:
        raise _error(key, f"must be one of {', '.join(choices)} (got {value!r})")
    return str(value)
