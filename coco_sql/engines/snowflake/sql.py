"""How coco-sql talks SQL to Snowflake: the executor of one statement (a real session's `session.sql`, or DuckDB in
Snowpark's local testing mode), the mapping between DuckDB and Snowpark column types, and the tables created with
the DataFrame API where no DDL runs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import pandas as pd

from coco_sql.errors import StoreError
from coco_sql.store.table_schema import Column, table_columns

if TYPE_CHECKING:
    from snowflake.snowpark import Session
    from snowflake.snowpark.types import DataType, StructType


class SqlResult(NamedTuple):
    frame: pd.DataFrame  # lower-case column names for Snowflake's unquoted (upper-case) ones
    types: dict[str, str]  # column -> DuckDB type name


class SqlExecutor(Protocol):
    """Runs one Snowflake-dialect statement (literals inlined) and returns its rows. `timeout_s` bounds it."""

    def __call__(self, sql: str, *, timeout_s: float | None = None) -> SqlResult: ...


class SessionSql:
    """The executor of a real account: `session.sql`, with Snowflake's own statement timeout."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __call__(self, sql: str, *, timeout_s: float | None = None) -> SqlResult:
        frame = self._session.sql(sql)
        params = {"STATEMENT_TIMEOUT_IN_SECONDS": max(1, round(timeout_s))} if timeout_s else None
        types = {_column_name(f.name): duckdb_type(f.datatype) for f in frame.schema.fields}
        data = frame.to_pandas(statement_params=params)
        data.columns = [_column_name(c) for c in data.columns]
        return SqlResult(data, types)


def is_local(session: Session) -> bool:
    """Whether `session` is one of Snowpark's local testing mode (no SQL, no DDL: `local`)."""
    from snowflake.snowpark.mock._connection import MockServerConnection

    return isinstance(getattr(session, "_conn", None), MockServerConnection)


def create_tables(session: Session) -> None:
    """coco-sql's tables in the session's schema, where missing, with the DataFrame API: what `coco-sql deploy`
    creates with DDL on an account, for Snowpark's local testing mode (which runs no DDL)."""
    for name, columns in table_columns().items():
        schema = snowpark_schema([(c.name, c.type) for c in columns], columns)
        session.create_dataframe([], schema=schema).write.save_as_table(name, mode="ignore")


# -- type mapping ----------------------------------------------------------------------------------------------
def snowpark_type(duckdb: str) -> DataType:
    """The Snowpark type of a DuckDB column type of the schema (or of a procedure's result)."""
    from snowflake.snowpark import types as t

    upper = duckdb.upper()
    if upper.endswith("[]"):  # the deployed column is Snowflake's semi-structured ARRAY, whatever it holds
        return t.ArrayType()
    simple: dict[str, DataType] = {
        "BIGINT": t.LongType(), "INTEGER": t.LongType(), "TEXT": t.StringType(), "VARCHAR": t.StringType(),
        "DOUBLE": t.DoubleType(), "REAL": t.FloatType(), "FLOAT": t.FloatType(), "BOOLEAN": t.BooleanType(),
        "TIMESTAMP": t.TimestampType(t.TimestampTimeZone.NTZ), "JSON": t.VariantType(),
    }  # fmt: skip
    if upper not in simple:
        raise StoreError(f"no Snowpark type for the schema type {duckdb!r}")
    return simple[upper]


def snowpark_schema(
    columns: Sequence[tuple[str, str]], nullability: Sequence[Column] | None = None
) -> StructType:
    from snowflake.snowpark.types import StructField, StructType

    nullable = [c.nullable for c in nullability] if nullability is not None else [True] * len(columns)
    return StructType(
        [
            StructField(name, snowpark_type(kind), nullable=ok)
            for (name, kind), ok in zip(columns, nullable, strict=True)
        ]
    )


def duckdb_type(datatype: Any) -> str:
    """The DuckDB type name coco-sql's tasks use for a Snowpark column type."""
    from snowflake.snowpark import types as t

    if isinstance(datatype, t.DecimalType):
        return "BIGINT" if datatype.scale == 0 else "DOUBLE"
    if isinstance(datatype, t.VectorType):  # VECTOR(INT | FLOAT, n)
        return "INTEGER[]" if datatype.element_type == "int" else "FLOAT[]"
    if isinstance(datatype, t.ArrayType):
        inner = datatype.element_type
        return (
            f"{duckdb_type(inner)}[]"
            if inner is not None and not isinstance(inner, t.VariantType)
            else "JSON"
        )
    names = {t.LongType: "BIGINT", t.IntegerType: "BIGINT", t.ShortType: "BIGINT", t.ByteType: "BIGINT",
             t.StringType: "VARCHAR", t.DoubleType: "DOUBLE", t.FloatType: "DOUBLE", t.BooleanType: "BOOLEAN",
             t.TimestampType: "TIMESTAMP", t.DateType: "DATE", t.VariantType: "JSON", t.MapType: "JSON",
             t.StructType: "JSON"}  # fmt: skip
    for kind, name in names.items():
        if isinstance(datatype, kind):
            return name
    return "VARCHAR"


def _column_name(name: str) -> str:
    """Snowflake reports unquoted identifiers in upper case; coco-sql's columns are lower case."""
    unquoted = name.strip('"')
    return unquoted.lower() if unquoted.isupper() or not name.startswith('"') else unquoted
