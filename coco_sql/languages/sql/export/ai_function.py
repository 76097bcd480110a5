"""A champion as a Snowflake AI function: `CREATE OR REPLACE AI FUNCTION name(args) RETURNS type AS $$ body $$`
(form `snowflake_ai_function`), and the deploy check of such a statement.

An AI function is one scalar expression over its arguments ("CREATE AI FUNCTION"), so the form takes a program
whose output is one expression per row of `input` (`aifo.ai_function_body`: no CTE, join, filter or table read);
a guard or a cascade in front of the AI call is such an expression, a learned proxy's CTEs are not (the form
says so in one line and names the forms that take them). The function's signature:

- a task made from an AI_FUNCTION_OPTIMIZATION spec (`aifo.AifoSettings`): the spec's function, under its name
  with `_coco` (the optimizer's own rule: the original function is never modified), its arguments and return
  type, each input column read back as the argument that carried it;
- any other task: `coco_<task>_champion`, one argument per input column under its own name and type (DuckDB's
  types written as Snowflake's), returning the contract's type.

A statement written so is read back (the optimizer part's `parse_ai_function`: `aifo.optimizer`) and its body checked by sqlglot
in Snowflake's dialect before it is returned; `coco-sql check-deploy --program FILE --task T` checks a file
holding one (`check_statement`): the statement, the body's own rules, and the body as a program over the
arguments through the usual deploy check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from sqlglot import exp

from coco_sql.errors import TaskError
from coco_sql.languages.sql.aifo import RETURNS, AifoSettings, ai_function_body, optimizer
from coco_sql.plugin_loader import DEPLOY_DIALECT, SANDBOX_DIALECT
from coco_sql.sqlkit.macros import expand_program

if TYPE_CHECKING:
    from coco_sql.engines import Finding
    from coco_sql.tasks import TaskPack

FORM = "snowflake_ai_function"
EXPERIMENT_FORM = "snowflake_experiment"
_STATEMENT = re.compile(r"\s*(--[^\n]*\n\s*)*CREATE\s+(OR\s+REPLACE\s+)?AI\s+FUNCTION\b", re.I)


def ai_function_export(code: str, dialect: str, pack: TaskPack, name: str) -> str:
    """The CREATE AI FUNCTION statement of program `code` (module docstring), with a comment header."""
    settings = AifoSettings.of(pack.settings)
    if settings is not None:
        function = f"{settings.function}_coco" if settings.function else name
        arguments = [(argument, kind) for argument, kind, _ in settings.arguments]
        carried = {column: argument for argument, _, column in settings.arguments}
        returns = settings.returns
    else:
        function = name
        arguments = [(column, _snowflake_type(kind)) for column, kind in pack.input_columns.items()]
        carried = {column: column for column in pack.input_columns}
        returns = RETURNS.get(pack.contract.type, "VARCHAR")
    program = expand_program(code, dialect) or code
    body = ai_function_body(program, dialect, carried, pack.contract.output)
    aifo = optimizer()
    problems = aifo.body_problems(body)
    if problems:
        raise TaskError(
            f"the champion cannot be an AI function: {problems[0]}; export it as snowflake_function or "
            "snowflake_view"
        )
    header = (
        f"-- coco-sql: the champion as an AI function; SELECT {function}({', '.join(carried)}) FROM <table>\n"
        "-- answers what the program's output column answers for each row.\n"
    )
    if aifo.complete_missing(body):
        header += (
            "-- Its body calls no AI_COMPLETE: CREATE AI FUNCTION's usage notes accept AI_CLASSIFY and the other\n"
            "-- scalar AI functions, its Arguments section asks for AI_COMPLETE (a preview page).\n"
        )
    return header + aifo.create_ai_function(
        function, arguments, returns, body, comment=f"coco-sql {pack.name}"
    )


def experiment_export(code: str, dialect: str, pack: TaskPack, name: str) -> str:
    """The champion beside Snowflake's optimizer in Snowflake's own harness, for a task made from a spec (form
    `snowflake_experiment`): the champion as an AI function (`ai_function_export`), an AI_FUNCTION_EVALUATION
    experiment of it on the spec's dataset version and metric, the spec's AI_FUNCTION_OPTIMIZATION experiment,
    and (a comment: its run is known once it has run) the promotion of the optimizer's run, CREATE AI FUNCTION
    ... FROM EXPERIMENT ... RUN. A one-line TaskError for a task made otherwise."""
    settings = AifoSettings.of(pack.settings)
    if settings is None or not settings.spec:
        raise TaskError(
            f"form {EXPERIMENT_FORM!r} needs a task made from an AI_FUNCTION_OPTIMIZATION spec (coco-sql init "
            "aifo, coco_task option 'spec'); export this one as snowflake_ai_function"
        )
    function = ai_function_export(code, dialect, pack, name)
    coco = f"{settings.function}_coco" if settings.function else name
    base = settings.function or name
    columns = ", ".join(column for _, _, column in settings.arguments)
    aifo = optimizer()
    evaluation = aifo.evaluation_spec(
        f"{coco}({columns})", settings.metric, settings.dataset, settings.version, settings.ground_truth
    )
    signature = [(argument, kind) for argument, kind, _ in settings.arguments]
    promote = aifo.create_from_experiment(
        f"{base}_tuned", signature, settings.returns, f"{base}_opt", "ITER_1"
    )
    return (
        "-- coco-sql: its champion and Snowflake's optimizer on the same specification, side by side in\n"
        "-- Snowflake's own harness (the spec's dataset version and metric). 1. the champion:\n"
        f"{function}\n-- 2. the champion measured by Snowflake (SHOW RUN METRICS IN EXPERIMENT {coco}_eval):\n"
        f"{aifo.create_experiment(f'{coco}_eval', evaluation, 'AI_FUNCTION_EVALUATION')}\n"
        "-- 3. Snowflake's optimizer on the spec (runs SEED, ITER_<n>; compare test_score and\n"
        f"-- cost_compared_to_seed: SHOW RUN METRICS IN EXPERIMENT {base}_opt):\n"
        f"{aifo.create_experiment(f'{base}_opt', settings.spec)}\n"
        "-- 4. then promote the frontier run you choose, e.g.:\n"
        + "".join(f"-- {line}\n" for line in promote.splitlines())
    )


def is_statement(code: str) -> bool:
    """Whether `code` is a CREATE AI FUNCTION statement (comments before it allowed)."""
    return _STATEMENT.match(code) is not None


def check_statement(
    code: str, where: str, check_program: Callable[[str, Mapping[str, str]], list[Finding]]
) -> list[Finding]:
    """The deploy check of a CREATE AI FUNCTION statement: it reads as one, its body keeps an AI function's
    rules (the optimizer part's `body_problems`), and the body passes `check_program` as the query
    `SELECT <body> AS answer FROM input` over the arguments as input's columns (name -> DuckDB type)."""
    from coco_sql.engines import Finding

    text = "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("--"))
    aifo = optimizer()
    try:
        definition = aifo.parse_ai_function(text)
    except TaskError as error:
        return [Finding(where, str(error))]
    findings = [
        Finding(f"{where}: {definition.name}", problem) for problem in aifo.body_problems(definition.body)
    ]
    if findings:
        return findings
    columns = {argument: _duckdb_type(kind) for argument, kind in definition.arguments}
    query = f"SELECT id, {definition.body} AS answer FROM input"
    return check_program(query, columns)


def _snowflake_type(duckdb_type: str) -> str:
    return exp.DataType.build(duckdb_type, dialect=SANDBOX_DIALECT).sql(dialect=DEPLOY_DIALECT)


def _duckdb_type(snowflake_type: str) -> str:
    return exp.DataType.build(snowflake_type, dialect=DEPLOY_DIALECT).sql(dialect=SANDBOX_DIALECT)
