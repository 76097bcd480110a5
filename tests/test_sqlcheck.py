"""Specification of the candidate validator: what a candidate may be, and how each rejection reads.

Tests run against real sqlglot, and where the produced SQL matters, against a real in-memory DuckDB holding an
``input`` table, so the Snowflake fix-ups are proven by their results, not by string comparison.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import pytest

from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import ValidatedProgram, parse_program, validate_candidate

COLUMNS = {"text": "VARCHAR", "doc": "JSON", "tags": "JSON", "n": "INTEGER"}
AI = frozenset({"AI_CLASSIFY", "AI_COMPLETE", "PROMPT", "SNOWFLAKE.CORTEX.COMPLETE"})
DUCK = ValidationSpec(input_columns=COLUMNS, output_column="label")
DUCK_AI = ValidationSpec(input_columns=COLUMNS, output_column="label", allowed_functions=AI)
SNOW = ValidationSpec(input_columns=COLUMNS, output_column="label", dialect="snowflake")
SNOW_AI = ValidationSpec(
    input_columns=COLUMNS, output_column="label", allowed_functions=AI, dialect="snowflake"
)


@pytest.fixture
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB with the ``input`` relation (and a ``test`` table a candidate must not read)."""
    connection = duckdb.connect()
    connection.execute("CREATE TABLE input (id VARCHAR, text VARCHAR, doc JSON, tags JSON, n INTEGER)")
    connection.execute(
        """INSERT INTO input VALUES
        ('1', 'apple pie', '{"field": "red", "a": {"b": "7"}}', '["x", "y"]', 1),
        ('2', 'banana', '{"field": "yellow", "a": {"b": 8}}', '[{"name": "z"}]', 2)"""
    )
    connection.execute("CREATE TABLE test AS SELECT * FROM input")
    yield connection
    connection.close()


def run(con: duckdb.DuckDBPyConnection, program: ValidatedProgram) -> list[tuple[object, ...]]:
    """Execute the validated SQL and return (id, label) rows in id order (then label order)."""
    rel = con.sql(f"SELECT id, label FROM ({program.sql}) ORDER BY id, label")
    return rel.fetchall()


def rejected(source: str, spec: ValidationSpec = DUCK) -> str:
    """The rejection message for ``source``, asserting it is a single non-empty line."""
    with pytest.raises(CandidateRejected) as info:
        validate_candidate(source, spec)
    message = str(info.value)
    assert message and "\n" not in message and "\x1b" not in message
    return message


# ---------------------------------------------------------------------------------------------- accepted


def test_plain_query_is_accepted_and_runs(con: duckdb.DuckDBPyConnection) -> None:
    program = validate_candidate("SELECT id, upper(text) AS label FROM input", DUCK)
    assert not program.wrapped
    assert program.expression.named_selects == ["id", "label"]
    assert run(con, program) == [("1", "APPLE PIE"), ("2", "BANANA")]


def test_ctes_joins_and_subqueries_are_accepted(con: duckdb.DuckDBPyConnection) -> None:
    source = """
        WITH words AS (SELECT id, split_part(text, ' ', 1) AS w FROM input),
             scored AS (SELECT w.id, length(w.w) AS len FROM words AS w JOIN input AS i ON i.id = w.id)
        SELECT s.id, CASE WHEN s.len > 5 THEN 'long' ELSE 'short' END AS label
        FROM scored AS s
        WHERE s.id IN (SELECT id FROM input WHERE n > 0)
    """
    assert run(con, validate_candidate(source, DUCK)) == [("1", "short"), ("2", "long")]


def test_bare_scalar_expression_is_wrapped(con: duckdb.DuckDBPyConnection) -> None:
    program = validate_candidate("CASE WHEN text LIKE '%apple%' THEN 'fruit' ELSE 'other' END", DUCK)
    assert program.wrapped
    assert (
        program.sql
        == "SELECT id, CASE WHEN text LIKE '%apple%' THEN 'fruit' ELSE 'other' END AS label FROM input"
    )
    assert run(con, program) == [("1", "fruit"), ("2", "other")]


def test_bare_ai_call_is_wrapped_when_the_task_enables_it() -> None:
    program = validate_candidate("AI_CLASSIFY(text, ['a', 'b'])", DUCK_AI)
    assert program.wrapped
    # Bound to the sandbox's UDF: full arity, JSON arguments, JSON result (see sqlkit/ai_binding.py).
    assert program.sql == (
        "SELECT id, CAST(AI_CLASSIFY(TO_JSON(text), TO_JSON(['a', 'b']), NULL) AS JSON) AS label FROM input"
    )


def test_select_star_counts_as_returning_input_columns() -> None:
    assert validate_candidate("SELECT *, text AS label FROM input", DUCK).sql.startswith("SELECT *")


def test_parse_program_returns_a_duckdb_query_without_policy_checks() -> None:
    tree = parse_program("IFF(n > 1, 'a', 'b')", SNOW)
    assert (
        tree.sql(dialect="duckdb") == "SELECT id, CASE WHEN n > 1 THEN 'a' ELSE 'b' END AS label FROM input"
    )
    unchecked = parse_program("SELECT id, getenv('HOME') AS label FROM test", DUCK)
    assert unchecked.sql(dialect="duckdb") == "SELECT id, GETENV('HOME') AS label FROM test"
    with pytest.raises(CandidateRejected, match="could not parse"):
        parse_program("SELECT (", DUCK)


# --------------------------------------------------------------------------------------------- snowflake


def test_snowflake_native_constructs_run_in_duckdb(con: duckdb.DuckDBPyConnection) -> None:
    source = """
        SELECT id, IFF(REGEXP_LIKE(text, '.*an.*'), 'has_an', 'no_an') AS label,
               ARRAY_SIZE(ARRAY_CONSTRUCT(1, 2, n)) AS size
        FROM input
        QUALIFY ROW_NUMBER() OVER (PARTITION BY id ORDER BY n) = 1
    """
    program = validate_candidate(source, SNOW)
    assert "QUALIFY" in program.sql
    assert run(con, program) == [("1", "no_an"), ("2", "has_an")]


def test_snowflake_variant_path_cast_to_string_is_unquoted(con: duckdb.DuckDBPyConnection) -> None:
    program = validate_candidate("SELECT id, doc:field::string AS label FROM input", SNOW)
    assert "->>" in program.sql
    assert run(con, program) == [("1", "red"), ("2", "yellow")]


def test_snowflake_variant_path_cast_to_number_parses_strings_and_numbers(
    con: duckdb.DuckDBPyConnection,
) -> None:
    program = validate_candidate("SELECT id, doc:a.b::int + 1 AS label FROM input", SNOW)
    assert run(con, program) == [("1", 8), ("2", 9)]


def test_snowflake_lateral_flatten_becomes_json_each(con: duckdb.DuckDBPyConnection) -> None:
    source = "SELECT i.id, f.value::string AS label FROM input i, LATERAL FLATTEN(input => i.tags) f"
    program = validate_candidate(source, SNOW)
    assert "JSON_EACH(i.tags)" in program.sql
    assert run(con, program) == [("1", "x"), ("1", "y"), ("2", '{"name":"z"}')]


def test_snowflake_table_flatten_with_path_access(con: duckdb.DuckDBPyConnection) -> None:
    source = (
        "SELECT id, f.value:name::string AS label FROM input, TABLE(FLATTEN(input => tags)) AS f WHERE n = 2"
    )
    assert run(con, validate_candidate(source, SNOW)) == [("2", "z")]


def test_json_each_is_not_available_to_authors() -> None:
    assert "JSON_EACH" in rejected("SELECT i.id, j.value AS label FROM input i, json_each(i.tags) j")


def test_flatten_options_we_cannot_translate_are_rejected() -> None:
    message = rejected(
        "SELECT id, f.value AS label FROM input, LATERAL FLATTEN(input => tags, outer => true) f", SNOW
    )
    assert "OUTER" in message


def test_snowflake_named_arguments_become_positional() -> None:
    source = (
        "SELECT id, AI_COMPLETE(model => 'm', prompt => text, response_format => 'j') AS label FROM input"
    )
    program = validate_candidate(source, SNOW_AI)
    # A response_format makes AI_COMPLETE return an object: its JSON-returning UDF is bound.
    assert "COCO_AI_COMPLETE_JSON(TO_JSON('m'), TO_JSON(text), NULL, TO_JSON('j'), NULL)" in program.sql
    classify = validate_candidate("AI_CLASSIFY(list_of_categories => ['a', 'b'], input => text)", SNOW_AI)
    assert "AI_CLASSIFY(TO_JSON(text), TO_JSON(['a', 'b']), NULL)" in classify.sql
    # A name only this project accepted is refused in Snowflake dialect, with the documented one.
    message = rejected("AI_CLASSIFY(categories => ['a', 'b'], input => text)", SNOW_AI)
    assert "'categories'" in message and "use list_of_categories =>" in message


def test_unknown_named_argument_is_rejected_with_the_parameter_list() -> None:
    message = rejected("AI_COMPLETE(model => 'm', question => text)", SNOW_AI)
    assert "question" in message and "model, prompt" in message


def test_schema_qualified_ai_call_needs_to_be_enabled() -> None:
    source = "SELECT id, SNOWFLAKE.CORTEX.COMPLETE('m', text) AS label FROM input"
    assert validate_candidate(source, SNOW_AI).sql.endswith("FROM input")
    assert "SNOWFLAKE.CORTEX.COMPLETE" in rejected(source, SNOW)


# ------------------------------------------------------------------------------------- statement rejections


@pytest.mark.parametrize(
    ("source", "statement"),
    [
        ("CREATE TABLE t AS SELECT 1", "CREATE TABLE"),
        ("DROP TABLE input", "DROP TABLE"),
        ("INSERT INTO input VALUES ('3', 'x', NULL, NULL, 3)", "INSERT"),
        ("UPDATE input SET text = 'x'", "UPDATE"),
        ("DELETE FROM input", "DELETE"),
        ("WITH d AS (DELETE FROM input RETURNING *) SELECT id, text AS label FROM d", "DELETE"),
        ("COPY input TO '/tmp/out.csv'", "COPY"),
        ("ATTACH 'other.db' AS other", "ATTACH"),
        ("PRAGMA version", "PRAGMA"),
        ("SET threads = 1", "SET"),
        ("CALL pragma_version()", "CALL"),
        ("INSTALL httpfs", "INSTALL"),
        ("LOAD httpfs", "LOAD"),
        ("DESCRIBE input", "DESCRIBE"),
    ],
)
def test_statements_other_than_a_query_are_rejected(source: str, statement: str) -> None:
    message = rejected(source)
    assert message.startswith(f"{statement} is not allowed")
    assert "read-only query" in message


def test_snowflake_commands_are_rejected() -> None:
    assert rejected("CALL my_proc()", SNOW).startswith("CALL is not allowed")


def test_two_statements_are_rejected() -> None:
    assert rejected("SELECT id, text AS label FROM input; DROP TABLE input") == (
        "expected exactly one statement, got 2"
    )


def test_empty_and_unparseable_candidates_are_rejected() -> None:
    assert "empty candidate" in rejected("   \n ")
    message = rejected("SELECT id, upper(text AS label FROM input")
    assert message.startswith("could not parse candidate:") and "line 1" in message


# -------------------------------------------------------------------------------------- function rejections


@pytest.mark.parametrize(
    ("call", "name", "reason"),
    [
        ("random()", "RAND", "non-deterministic"),
        ("now()", "NOW", "non-deterministic"),
        ("uuid()", "UUID", "non-deterministic"),
        ("read_text('x')", "READ_TEXT", "reads files"),
        ("getenv('HOME')", "GETENV", "reads files, settings, the environment"),
        ("current_setting('threads')", "CURRENT_SETTING", "settings"),
        ("my_udf(text)", "MY_UDF", "allow-list"),
    ],
)
def test_functions_off_the_allow_list_are_rejected(call: str, name: str, reason: str) -> None:
    message = rejected(f"SELECT id, {call} AS label FROM input")
    assert message.startswith(f"function {name} is not allowed") and reason in message


def test_ai_functions_are_allowed_only_when_the_task_enables_them() -> None:
    assert "AI_COMPLETE" in rejected("AI_COMPLETE('m', text)")
    assert validate_candidate("AI_COMPLETE('m', text)", DUCK_AI).wrapped


def test_arity_is_checked_for_snowflake_iff() -> None:
    message = rejected("IFF(text = 'a', 'b')", SNOW)
    assert "takes 3 argument(s), got 2" in message and "IFF" in message


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("SELECT id, split_part(text, ',') AS label FROM input", "SPLIT_PART takes 3"),
        ("SELECT id, substring(text) AS label FROM input", "SUBSTRING takes 2 to 3"),
        ("SELECT id, prefix(text, 'a', 'b') AS label FROM input", "PREFIX takes 2"),
        ("SELECT id, AI_COMPLETE('m') AS label FROM input", "AI_COMPLETE takes 2 to 5"),
    ],
)
def test_arity_errors_name_the_function(source: str, fragment: str) -> None:
    assert fragment in rejected(source, DUCK_AI)


@pytest.mark.parametrize(
    ("source", "spec", "fragment"),
    [
        ("SELECT id, text AS label FROM input USING SAMPLE 1", DUCK, "sampling is non-deterministic"),
        ("SELECT id, text AS label FROM input SAMPLE (10)", SNOW, "sampling is non-deterministic"),
        ("SELECT id, $1 AS label FROM input", DUCK, "query parameter '$1'"),
    ],
)
def test_non_deterministic_constructs_are_rejected(source: str, spec: ValidationSpec, fragment: str) -> None:
    assert fragment in rejected(source, spec)


def test_aggregate_in_a_bare_expression_is_rejected() -> None:
    assert "GROUP BY" in rejected("count(*)")


# ----------------------------------------------------------------------------------------- table rejections


@pytest.mark.parametrize(
    ("source", "fragment"),
    [
        ("SELECT * FROM read_csv('/etc/passwd')", "table function READ_CSV"),
        ("SELECT * FROM '/etc/passwd'", "reading a file ('/etc/passwd')"),
        ("SELECT * FROM glob('*')", "table function GLOB"),
        (
            "SELECT * FROM duckdb_settings()",
            "table function",
        ),  # range() and generate_series() are allowed (issue 39)
        ("SELECT id, text AS label FROM test", "table 'test'"),
        ("SELECT id, text AS label FROM input WHERE id IN (SELECT id FROM val)", "table 'val'"),
        ("SELECT id, text AS label FROM main.input", "qualified table name 'main.input'"),
        ("SELECT id, text AS label FROM other.db.t", "qualified table name"),
        ("WITH x AS (SELECT * FROM evaluations) SELECT id, text AS label FROM x", "table 'evaluations'"),
    ],
)
def test_only_the_input_relation_and_ctes_may_be_read(source: str, fragment: str) -> None:
    message = rejected(source)
    assert fragment in message and "only the relation 'input'" in message


def test_snowflake_stages_and_qualified_tables_are_rejected() -> None:
    assert "'@stage/file.csv'" in rejected("SELECT id, text AS label FROM @stage/file.csv", SNOW)
    assert "qualified table name" in rejected("SELECT id, text AS label FROM db.sch.input", SNOW)


# --------------------------------------------------------------------------------------- output contract


def test_unknown_column_is_rejected() -> None:
    message = rejected("SELECT id, texte AS label FROM input")
    assert "texte" in message and "input columns are id, text" in message


def test_missing_output_column_is_rejected_with_what_it_returns() -> None:
    message = rejected("SELECT id, text FROM input")
    assert "missing label" in message and "it returns: id, text" in message


def test_missing_id_is_rejected() -> None:
    assert "missing id" in rejected("SELECT text AS label FROM input")


def test_output_column_follows_the_spec() -> None:
    spec = ValidationSpec(input_columns=COLUMNS, output_column="score")
    assert validate_candidate("n * 2", spec).sql == "SELECT id, n * 2 AS score FROM input"
