"""A Snowflake AI_FUNCTION_OPTIMIZATION specification as a SQL task: coco_task's option `spec` (and
`ai_function`), `coco-sql init aifo SPEC.yaml`.

The specification (the deploy engine's optimizer part, `EnginePlugin.ai_optimizer`: Snowflake's is
`engines.snowflake.aifo`, found through the registry, `optimizer`) names an AI function, the labelled rows, one metric and the models
to try. As a task:

- the seed program is the function's body over `input`: `SELECT id, <body> AS <label> FROM input`, each argument
  read from the dataset column `dataset.column_mapping.argument_mapping` maps it to (its own name otherwise), so
  the program reads the user's table as it is, and the export as CREATE AI FUNCTION maps the columns back to the
  arguments (`AifoSettings.arguments`);
- a `function_name` spec names a CREATE AI FUNCTION object, whose body lives in Snowflake: its statement is
  option `ai_function` (its name and argument types must be the spec's); a `function_body` spec needs none;
- the label is `column_mapping.ground_truth` (or option `label`), the scorer the metric's: exact_match is scorer
  `exact`; the other metrics (fuzzy, contains, redaction, an LLM judge, a custom UDF) are refused in one line;
- what the task keeps beyond coco_task's options (the function's name and signature, its return type, the
  models, the reflection model, strategy and budget, the dataset) is the `[sql.aifo]` table of its task.toml,
  read back as `AifoSettings`: the export (CREATE AI FUNCTION under the function's own signature) and the
  `prompt_only` baseline (which chooses among the spec's models) read it there.

The source table is coco_task's (`coco-sql init aifo` defaults it to the spec's dataset name): the rows of a
SNOWFLAKE.ML.DATASET version live in a table here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from coco_sql.errors import TaskError
from coco_sql.plugin_loader import DEPLOY_DIALECT, load_engine

if TYPE_CHECKING:
    from coco_sql.engines.snowflake.aifo import AiFunctionDefinition, OptimizationSpec

SETTINGS_KEY = "aifo"  # the [sql.aifo] table of a task.toml
SCORERS = {"exact_match": "exact"}  # the spec's metric -> coco-sql's scorer
# a task's contract type -> the Snowflake type an AI function returning it declares
RETURNS = {
    "VARCHAR": "VARCHAR",
    "INTEGER": "NUMBER",
    "DOUBLE": "FLOAT",
    "BOOLEAN": "BOOLEAN",
    "VARCHAR[]": "ARRAY",
}
_CONTRACT_OF = {
    "VARCHAR": "VARCHAR",
    "TEXT": "VARCHAR",
    "BOOLEAN": "BOOLEAN",
    "FLOAT": "DOUBLE",
    "DOUBLE": "DOUBLE",
}
# a column type of the source (DuckDB spelling) -> the Snowflake type of the argument that reads it
_ARGUMENT_TYPES = {
    "VARCHAR": "VARCHAR",
    "BIGINT": "NUMBER",
    "INTEGER": "NUMBER",
    "DOUBLE": "FLOAT",
    "BOOLEAN": "BOOLEAN",
}


@dataclass(frozen=True)
class AifoSettings:
    """What a spec task keeps beyond coco_task's options (module docstring), as its `[sql.aifo]` table."""

    function: str  # the AI function's name ('db.sch.fn'), or '' for a function_body spec
    arguments: tuple[tuple[str, str, str], ...]  # (argument, its Snowflake type, the input column it reads)
    returns: str  # the Snowflake type it returns
    models: tuple[str, ...]
    reflection_model: str
    strategy: str
    budget: str
    dataset: str
    version: str
    metric: str
    ground_truth: str = ""  # the label column
    spec: str = ""  # the specification as written

    def table(self) -> dict[str, Any]:
        """The `[sql.aifo]` table as task.toml holds it."""
        return {
            "function": self.function,
            "arguments": [list(a) for a in self.arguments],
            "returns": self.returns,
            "models": list(self.models),
            "reflection_model": self.reflection_model,
            "strategy": self.strategy,
            "budget": self.budget,
            "dataset": self.dataset,
            "version": self.version,
            "metric": self.metric,
            "ground_truth": self.ground_truth,
            "spec": self.spec,
        }

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> AifoSettings | None:
        """The settings of a task whose `[sql]` table is `settings`; None for a task not made from a spec."""
        table = settings.get(SETTINGS_KEY)
        if not isinstance(table, Mapping):
            return None
        return cls(
            function=str(table.get("function", "")),
            arguments=tuple((str(a), str(t), str(c)) for a, t, c in table.get("arguments", [])),
            returns=str(table.get("returns", "VARCHAR")),
            models=tuple(str(m) for m in table.get("models", [])),
            reflection_model=str(table.get("reflection_model", "")),
            strategy=str(table.get("strategy", "quality_first")),
            budget=str(table.get("budget", "auto")),
            dataset=str(table.get("dataset", "")),
            version=str(table.get("version", "")),
            metric=str(table.get("metric", "exact_match")),
            ground_truth=str(table.get("ground_truth", "")),
            spec=str(table.get("spec", "")),
        )


def optimizer() -> Any:
    """The AI-function optimizer's documents, read and written: the deploy engine's (`DEPLOY_DIALECT`,
    `EnginePlugin.ai_optimizer`; Snowflake's `engines.snowflake.aifo`), found through the registry."""
    return load_engine(DEPLOY_DIALECT).ai_optimizer()


class SpecTasks:
    """`languages.base.TaskSpec` for SQL: coco_task options `spec` and `ai_function`."""

    def options(self, name: str, given: Mapping[str, Any]) -> dict[str, Any]:
        """`given` (checked coco_task options with `spec`) with the options the spec sets (module docstring): a
        one-line TaskError on a field coco-sql cannot take, or an option the user gave that the spec sets to
        something else."""
        spec, definition = _read(name, given)
        label = spec.ground_truth or given.get("label")
        if not label:
            raise TaskError(
                f"task {name!r}: the spec names no label column (dataset.column_mapping.ground_truth): "
                "add it there, or give option 'label'"
            )
        output = str(given.get("output") or label)
        arguments = _argument_columns(name, spec, definition)
        body = _over_columns(name, _body(spec, definition), arguments)
        seed = f"SELECT\n  id,\n  {body}\n    AS {exp.to_identifier(output).sql(DEPLOY_DIALECT)}\nFROM input"
        derived: dict[str, Any] = {
            "label": label,
            "seed_program": seed,
            "input_columns": list(dict.fromkeys(column for _, column in arguments)),
            "scorer": SCORERS[spec.metric],
            "dialect": DEPLOY_DIALECT,
        }
        if definition is not None:
            contract = _contract_type(definition.returns)
            if contract is None:
                raise TaskError(
                    f"task {name!r}: the AI function returns {definition.returns}; coco-sql scores VARCHAR, "
                    "NUMBER, FLOAT and BOOLEAN answers"
                )
            derived["output_type"] = contract
        for key, value in derived.items():
            if given.get(key) is not None and given[key] != value:
                raise TaskError(
                    f"task {name!r}: option {key!r} is set by the spec (to {_short(value)}): drop it from the "
                    "options, or change the spec"
                )
        description = (
            f"AI_FUNCTION_OPTIMIZATION of {spec.function_name or 'a function body'} on {spec.dataset}"
        )
        return {**given, **derived, "description": given.get("description") or description}

    def settings(self, options: Mapping[str, Any], types: Mapping[str, str]) -> dict[str, Any]:
        """The `[sql]` table of the task.toml of a task registered with `options` (spec included) over columns
        of DuckDB `types`."""
        spec, definition = _read("", options)
        arguments = _argument_columns("", spec, definition)
        if definition is not None:
            typed = [(a, t, c) for (a, t), (_, c) in zip(definition.arguments, arguments, strict=True)]
            returns = definition.returns
        else:
            typed = [
                (a, _ARGUMENT_TYPES.get(str(types.get(c, "VARCHAR")).upper(), "VARCHAR"), c)
                for a, c in arguments
            ]
            returns = RETURNS.get(str(options.get("output_type") or "VARCHAR"), "VARCHAR")
        signature = spec.signature
        settings = AifoSettings(
            function=signature[0] if signature else "",
            arguments=tuple(typed),
            returns=returns,
            models=spec.models,
            reflection_model=spec.reflection_model,
            strategy=spec.strategy,
            budget=spec.budget,
            dataset=spec.dataset,
            version=spec.version,
            metric=spec.metric,
            ground_truth=str(options.get("label", "")),
            spec=str(options.get("spec", "")),
        )
        return {SETTINGS_KEY: settings.table()}


def _read(name: str, options: Mapping[str, Any]) -> tuple[OptimizationSpec, AiFunctionDefinition | None]:
    where = f"task {name!r}: " if name else ""
    try:
        spec = optimizer().parse_spec(options.get("spec"))
        if spec.metric not in SCORERS:
            raise TaskError(
                f"AI_FUNCTION_OPTIMIZATION spec: metrics.name: coco-sql scores {', '.join(SCORERS)}; "
                f"{spec.metric!r} is not supported"
            )
        text = options.get("ai_function")
        if spec.function_name is None:
            if text is not None:
                raise TaskError(
                    "option 'ai_function' is the definition of the function a spec names in "
                    "function.function_name; this spec gives function.function_body"
                )
            return spec, None
        if text is None:
            raise TaskError(
                f"the spec names the AI function {spec.function_name}, whose body lives in Snowflake: give its "
                "CREATE AI FUNCTION statement as option 'ai_function' (coco-sql init aifo: --function FILE), or "
                "write the body in the spec as function.function_body"
            )
        definition = optimizer().parse_ai_function(str(text))
        signature = spec.signature
        assert signature is not None
        if (definition.name.upper(), definition.argument_types) != (signature[0].upper(), signature[1]):
            written = f"{definition.name}({', '.join(definition.argument_types)})"
            raise TaskError(
                f"option 'ai_function' defines {written}, not the spec's function.function_name "
                f"{spec.function_name}"
            )
        return spec, definition
    except TaskError as error:
        raise TaskError(f"{where}{error}") from None


def _body(spec: OptimizationSpec, definition: AiFunctionDefinition | None) -> str:
    return definition.body if definition is not None else str(spec.function_body)


def _argument_columns(
    name: str, spec: OptimizationSpec, definition: AiFunctionDefinition | None
) -> list[tuple[str, str]]:
    """(argument, the dataset column it reads), in the function's argument order (a body: in reading order)."""
    mapping = dict(spec.argument_mapping)
    if definition is not None:
        names = [a for a, _ in definition.arguments]
        unknown = [k for k in mapping if k not in names and not _positional(k, len(names))]
    else:
        tree = optimizer().scalar_expression(_body(spec, None), "the spec's function.function_body")
        names = list(dict.fromkeys(c.name for c in tree.find_all(exp.Column) if not c.table))
        unknown = [k for k in mapping if k not in names]
    if unknown:
        where = f"task {name!r}: " if name else ""
        raise TaskError(
            f"{where}AI_FUNCTION_OPTIMIZATION spec: dataset.column_mapping.argument_mapping.{unknown[0]}: the "
            f"function has no such argument (arguments: {', '.join(names) or 'none'})"
        )
    if not names:
        raise TaskError(f"task {name!r}: the function reads no argument, so there is nothing to classify")
    return [(a, mapping.get(a) or mapping.get(f"${i + 1}") or a) for i, a in enumerate(names)]


def _positional(key: str, count: int) -> bool:
    return key.startswith("$") and key[1:].isdigit() and 1 <= int(key[1:]) <= count


def _over_columns(name: str, body: str, arguments: list[tuple[str, str]]) -> str:
    """`body` with each argument read as the dataset column it maps to (in Snowflake's dialect)."""
    tree = optimizer().scalar_expression(body, "the function's body")
    columns = {a.lower(): c for a, c in arguments}
    for column in list(tree.find_all(exp.Column)):
        if column.table:
            continue
        if column.name.lower() not in columns:
            raise TaskError(
                f"task {name!r}: the function's body reads {column.name!r}, which is not an argument"
            )
        column.replace(exp.column(exp.to_identifier(columns[column.name.lower()])))
    return tree.sql(dialect=DEPLOY_DIALECT)


def _contract_type(returns: str) -> str | None:
    base = returns.split("(")[0].strip().upper()
    if base == "NUMBER":
        scale = returns.split(",")[1].strip(" )") if "," in returns else "0"
        return "INTEGER" if scale == "0" else "DOUBLE"
    if base in ("INT", "INTEGER", "BIGINT", "SMALLINT"):
        return "INTEGER"
    return _CONTRACT_OF.get(base)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def ai_function_body(program: str, dialect: str, arguments: Mapping[str, str], output: str) -> str:
    """The scalar body of an AI function computing `program`'s `output` column: the program must be one SELECT
    over `input` alone (no CTE, join, filter, grouping or order), its output one expression over input's
    columns; each column is read as the argument `arguments` maps it to (input column -> argument). A one-line
    TaskError saying which form to use otherwise."""
    tree = sqlglot.parse_one(program, read=dialect)
    refuse = "export it as snowflake_function or snowflake_view"
    if not isinstance(tree, exp.Select) or tree.args.get("with_") is not None:
        raise TaskError(
            f"a CREATE AI FUNCTION body is one expression, and this program is not one SELECT: {refuse}"
        )
    for clause in ("joins", "where", "group", "having", "qualify", "order", "limit", "distinct"):
        if tree.args.get(clause):
            raise TaskError(
                f"a CREATE AI FUNCTION body is one expression per row; this program has {clause.upper()}: {refuse}"
            )
    source = tree.args.get("from_") or tree.args.get("from")
    if source is None or not isinstance(source.this, exp.Table) or source.this.name.lower() != "input":
        raise TaskError(
            f"a CREATE AI FUNCTION body reads only its arguments; this program reads more: {refuse}"
        )
    alias = source.this.alias_or_name
    chosen = [p for p in tree.expressions if p.alias_or_name.lower() == output.lower()]
    if len(chosen) != 1:
        raise TaskError(f"the program has no single output column {output!r} to make an AI function of")
    body = (chosen[0].this if isinstance(chosen[0], exp.Alias) else chosen[0]).copy()
    if any(isinstance(node, exp.Subquery | exp.Query) for node in body.walk()):
        raise TaskError(
            f"a CREATE AI FUNCTION body reads only its arguments; this program's output reads a table: {refuse}"
        )
    lowered = {k.lower(): v for k, v in arguments.items()}
    for column in list(body.find_all(exp.Column)):
        if column.table and column.table.lower() not in ("input", alias.lower()):
            raise TaskError(
                f"the output reads {column.sql(dialect)}, which is not a column of input: {refuse}"
            )
        argument = lowered.get(column.name.lower())
        if argument is None:
            raise TaskError(f"the output reads {column.name!r}, which no argument of the AI function carries")
        column.replace(exp.column(exp.to_identifier(argument)))
    return body.sql(dialect=DEPLOY_DIALECT, pretty=True)
