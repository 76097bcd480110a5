"""The DuckDB export of a program that calls AI functions: the query the run evaluated, and what it needs.

Why (issue 26): an exported AI view ran nowhere: on a `coco_sql.connect` connection it failed with "Scalar
Function with name ai_classify does not exist!", in plain DuckDB with "ai_embed does not exist". A program's AI
calls keep Cortex's spelling (`AI_CLASSIFY(question, [...], {...})`), which no DuckDB function takes: in the
sandbox the validator binds each call to a UDF of fixed arity with JSON arguments (`sqlkit.ai_binding`). So
the DuckDB forms (view, table macro) of an AI program export that bound query, the one the run scored, over the
user's table; `coco_sql.connect` installs the UDFs it calls (`engines.duckdb.ai_functions`), answered in-process by
the same runtime and cache, so the view answers what the evaluations recorded. A comment header says so. The
Snowflake forms and dbt keep Cortex's spelling: they run on Cortex.
"""

from __future__ import annotations

from coco_sql.languages import language_for
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.sqlkit.calls import ai_functions_called
from coco_sql.tasks import TaskPack

DUCKDB_FORMS = frozenset({"duckdb_view", "duckdb_macro"})


def bound_program(code: str, dialect: str, form: str, pack: TaskPack) -> tuple[str, str, str] | None:
    """(the query the sandbox ran, its dialect 'duckdb', a comment header) when `form` is a DuckDB form and the
    program calls AI functions; None otherwise (the program exports as written)."""
    called = ai_functions_called(code, dialect)
    if form not in DUCKDB_FORMS or not called or pack.language != "sql":
        return None
    runnable = language_for(pack).validate(code).runnable
    header = (
        f"-- coco-sql: calls the AI functions {', '.join(called)} as the run evaluated them (JSON arguments);\n"
        "-- run it on a connection from coco_sql.connect(path), which installs them (plain DuckDB has none)\n"
    )
    return runnable, SANDBOX_DIALECT, header
