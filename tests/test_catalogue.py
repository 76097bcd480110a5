"""The AI function catalogue is the one table: the validator, the binder and the DuckDB UDFs all follow it.

Checked against the real parts: a DuckDB connection with the UDFs registered, the validator, the AiFunctions
methods, and the source of the modules that used to keep their own copies of the table.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

from coco_sql.engines.duckdb.ai import udfs as duckdb_udfs
from coco_sql.engines.duckdb.ai.functions import AiFunctions
from coco_sql.errors import CandidateRejected
from coco_sql.llm.runtime import AiRuntime
from coco_sql.sqlkit import ai_catalogue as catalogue
from coco_sql.sqlkit import allowlist
from coco_sql.sqlkit.ai_binding import UDFS
from coco_sql.sqlkit.ai_catalogue import CATALOGUE, AiFunction
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import validate_candidate

NAMES = [name for function in CATALOGUE for name in function.sql_names]
ENTRIES = [pytest.param(function, id=function.name) for function in CATALOGUE]


@pytest.fixture(scope="module")
def functions() -> AiFunctions:
    return AiFunctions(AiRuntime())  # builds no provider: nothing is called here


@pytest.fixture(scope="module")
def registered(functions: AiFunctions) -> Iterator[dict[str, tuple[str, list[str]]]]:
    """UDF name -> (return type, parameter types), as DuckDB reports them after register_ai_functions."""
    con = duckdb.connect()
    duckdb_udfs.register_ai_functions(con, functions)
    names = [udf.name for udf, _ in catalogue.bound_udfs()]
    rows = con.execute(
        "SELECT function_name, return_type, parameter_types FROM duckdb_functions() "
        "WHERE function_name IN (SELECT unnest(?))",
        [names],
    ).fetchall()
    yield {name: (returns, parameters) for name, returns, parameters in rows}
    con.close()


# ------------------------------------------------------------------------------------- DuckDB UDFs


def test_every_udf_is_registered_with_the_catalogue_types(
    registered: dict[str, tuple[str, list[str]]],
) -> None:
    expected = {udf.name: (udf.returns.duckdb, ["JSON"] * arity) for udf, arity in catalogue.bound_udfs()}
    assert registered == expected
    assert {function.udf.name for function in CATALOGUE if function.udf} <= set(registered)


@pytest.mark.parametrize("udf", [udf for udf, _ in catalogue.bound_udfs()], ids=lambda udf: udf.name)
def test_the_arrow_type_is_the_duckdb_type(udf: catalogue.Udf) -> None:
    """The arrow column a UDF hands back is read by DuckDB as the type the UDF is declared with."""
    empty = pa.table({"x": pa.array([], type=duckdb_udfs.arrow_type(udf.returns.arrow))})
    con = duckdb.connect()
    assert str(con.from_arrow(empty).types[0]) == udf.returns.duckdb
    con.close()


def test_each_udf_is_answered_by_the_named_method_with_one_parameter_per_argument(
    functions: AiFunctions,
) -> None:
    table = duckdb_udfs.implementations(functions)
    for udf, arity in catalogue.bound_udfs():
        method = getattr(functions, udf.method)
        assert table[udf.name] == method
        assert len(inspect.signature(method).parameters) == arity, udf.method
    assert len(table) == len(list(catalogue.bound_udfs()))


# ------------------------------------------------------------------------------------- validator arity


def _spec(dialect: str) -> ValidationSpec:
    return ValidationSpec(
        input_columns={"text": "VARCHAR"},
        output_column="out",
        allowed_functions=frozenset(NAMES),
        dialect=dialect,
    )


def _query(name: str, count: int) -> str:
    return f"SELECT id, {name}({', '.join(['text'] * count)}) AS out FROM input"


@pytest.mark.parametrize("dialect", ["snowflake", "duckdb"])
@pytest.mark.parametrize("function", ENTRIES)
def test_the_validator_checks_the_catalogue_arity(function: AiFunction, dialect: str) -> None:
    low, high = function.arity
    spec = _spec(dialect)
    for count in (low, low + 3) if high is None else (low, high):
        program = validate_candidate(_query(function.name, count), spec)
        if function.udf is not None:  # bound to the UDF the catalogue picks for the parameters given
            given = function.param_names[:count]
            assert f"{function.udf_for(given).name}(" in program.sql
    too_few_or_many = [low - 1] if high is None else [low - 1, high + 1]
    # sqlglot parses AI_CLASSIFY / AI_AGG / AI_SUMMARIZE_AGG as typed nodes: a wrong count fails the parse
    expected = "|".join(
        (
            rf"function {re.escape(function.name)} takes",
            "Required keyword: '\\w+' missing",
            "number of provided",
        )
    )
    for count in (c for c in too_few_or_many if c >= 0):
        with pytest.raises(CandidateRejected, match=expected):
            validate_candidate(_query(function.name, count), spec)


# ------------------------------------------------------------------------------------- one source


def test_the_validator_and_binder_tables_are_derived_from_the_catalogue() -> None:
    assert set(allowlist.AI_SIGNATURES) == set(NAMES) == set(catalogue.BY_NAME)
    for name, function in catalogue.BY_NAME.items():
        signature = allowlist.AI_SIGNATURES[name]
        assert signature.params == function.param_names
        assert signature.arity == function.arity
        assert UDFS.get(name) is (function if function.udf else None)


def test_no_other_module_spells_an_ai_function_or_udf_name() -> None:
    """Only the catalogue names AI functions and their UDFs (PROMPT, which has no UDF, is the binder's own)."""
    spelled = {name for name in NAMES if name != "PROMPT"} | {udf.name for udf, _ in catalogue.bound_udfs()}
    root = Path(catalogue.__file__).parents[1]
    for module in (
        "sqlkit/allowlist.py",
        "sqlkit/ai_binding.py",
        "engines/duckdb/ai/udfs.py",
    ):
        source = (root / module).read_text()
        quoted = {name for name in spelled if f'"{name}"' in source or f"'{name}'" in source}
        assert not quoted, f"{module} spells {sorted(quoted)}"


def test_a_malformed_entry_is_refused() -> None:
    udf = catalogue.Udf("X", "x", catalogue.TEXT)
    with pytest.raises(ValueError, match="required, then optional"):
        AiFunction("X", (catalogue.Param("a", "optional"), catalogue.Param("b")), udf)
    with pytest.raises(ValueError, match="object_when"):
        AiFunction("X", (catalogue.Param("a"),), udf, object_when=("b",))
