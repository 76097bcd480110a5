"""The warehouse as the engine of candidates, probes and Python programs (`SnowparkStore.candidate_engine()`).

A split's rows are staged once as a temporary table; every candidate, probe, draft test and screening query
runs over it as one warehouse query, and a Python program runs as a temporary Python UDF over it (Snowflake's
own sandbox runs it: a stored procedure may not start a process). Nothing is copied back but each query's
result.

Two executors run the queries. On an account, `SessionQueries`: one statement on the session's connection,
whose cursor reports the result's types with its rows (so a candidate costs its query and nothing else: no
DESCRIBE). In Snowpark's local testing mode, which has no SQL, `LocalQueries`: the Snowflake SQL is turned into
the DuckDB SQL the validator would make of it (`engines.snowflake.transpile.snowflake_to_duckdb`, AI calls bound to coco-sql's
UDFs) and runs in a locked-down in-memory DuckDB holding the staged tables (`sandbox.lockdown.LockedDuckDB`),
in this process, with Cortex's functions answered by a stand-in over the embedded model. That stand-in is
Cortex: what it spends is not coco-sql's accounting (the query's meter is, `engines.snowflake.meter`).
"""

from __future__ import annotations

import json
import uuid
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Protocol

import pandas as pd
import sqlglot
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from coco_sql.engines.snowflake.queries import MeteredQueries
from coco_sql.engines.snowflake.sql import is_local
from coco_sql.errors import EvaluationError, EvaluationTimeout
from coco_sql.store.base import PYTHON_HANDLER, QueryRows

if TYPE_CHECKING:
    from snowflake.snowpark import Session

    from coco_sql.engines.duckdb.ai.functions import AiFunctions
    from coco_sql.llm.routing import AiConfig

PYTHON_PACKAGES = ("numpy",)  # what a Python program's UDF may import besides the standard library
_JSON_TYPES = frozenset({"ARRAY", "VECTOR"})
_INTEGERS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                       "UBIGINT", "UHUGEINT"})  # fmt: skip  # returned as JSON text; read as lists (DuckDB's LIST)


class CandidateSql(Protocol):
    """Runs one read-only Snowflake query over staged tables; its rows and types. EvaluationError if it fails,
    EvaluationTimeout past `timeout_s`."""

    def __call__(self, sql: str, *, timeout_s: float) -> QueryRows: ...


class SessionQueries:
    """The executor on an account: one statement through the session's connection, timed out by Snowflake
    (the cursor's `timeout`), its types read from the cursor's description (no DESCRIBE)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def __call__(self, sql: str, *, timeout_s: float) -> QueryRows:
        from snowflake.connector.constants import FIELD_ID_TO_NAME

        cursor = self._session.connection.cursor()
        try:
            cursor.execute(sql, timeout=max(1, round(timeout_s)))
            rows = cursor.fetchall()
            description = cursor.description or ()
        except Exception as error:  # the connector's error types; a cancelled statement says so
            text = _first_line(error)
            kind = (
                EvaluationTimeout
                if "timeout" in text.lower() or "cancel" in text.lower()
                else EvaluationError
            )
            raise kind(text) from None
        finally:
            cursor.close()
        types = tuple(FIELD_ID_TO_NAME.get(d.type_code, "TEXT") for d in description)
        columns = tuple(_column_name(d.name) for d in description)
        return QueryRows(
            columns, [tuple(_cell(v, t) for v, t in zip(r, types, strict=True)) for r in rows], types
        )


class LocalQueries:
    """The executor of Snowpark's local testing mode (module docstring). The staged tables are read from the
    session once each and kept in one locked-down DuckDB (they never change; `forget` drops one)."""

    def __init__(self, session: Session, ai: AiConfig | None = None) -> None:
        self._session = session
        self._ai = ai
        self._functions: AiFunctions | None = None
        self._tables: dict[str, pd.DataFrame] = {}
        self._database: Any = None

    @property
    def config(self) -> AiConfig:
        """The stand-in's configuration: the environment's, as a local run's (its models answer as the DuckDB
        path's would)."""
        if self._ai is None:
            from coco_sql.llm.routing import AiConfig

            self._ai = AiConfig.from_environment()
        return self._ai

    def __call__(self, sql: str, *, timeout_s: float) -> QueryRows:
        from coco_sql.engines.snowflake.transpile import snowflake_to_duckdb
        from coco_sql.sqlkit.ai_binding import bind_ai_calls

        tree = sqlglot.parse_one(sql, read="snowflake")
        if not isinstance(tree, exp.Query):
            raise EvaluationError(f"a candidate query must be one SELECT, got {type(tree).__name__}")
        database = self._database_with(_tables_read(tree))
        duck = bind_ai_calls(snowflake_to_duckdb(tree)).sql(dialect="duckdb")
        result = database.run(duck, timeout_s)
        columns = tuple(c.lower() if c.isupper() else c for c in result.columns)
        return QueryRows(columns, result.rows, result.types)

    def create_table(self, name: str, sql: str, *, timeout_s: float) -> None:
        """Local testing runs no DDL: the query runs here, and its rows become a temporary table of the session,
        typed from DuckDB's types (`local_schema`)."""
        found = self(sql, timeout_s=timeout_s)
        schema = local_schema([c.upper() for c in found.columns], found.types)
        self._session.create_dataframe([list(r) for r in found.rows], schema=schema).write.save_as_table(
            name, mode="overwrite", table_type="temporary"
        )

    def forget(self, name: str) -> None:
        """A staged table is gone: the next query rebuilds the database without it."""
        if self._tables.pop(name.upper(), None) is not None and self._database is not None:
            self._database.close()
            self._database = None

    def _database_with(self, names: set[str]) -> Any:
        from coco_sql.sandbox.lockdown import LockedDuckDB

        missing = {n.upper() for n in names} - set(self._tables)
        for name in sorted(missing):
            self._tables[name] = self._session.table(name).to_pandas()
        if self._database is None or missing:
            if self._database is not None:
                self._database.close()
            first, *rest = list(self._tables.items()) or [("_none", pd.DataFrame({"x": []}))]
            self._database = LockedDuckDB(
                first[1], relation=first[0], register_udfs=self._register_ai, tables=dict(rest)
            )
        return self._database

    def _register_ai(self, con: Any) -> None:
        from coco_sql.engines.duckdb.ai.functions import AiFunctions
        from coco_sql.engines.duckdb.ai.udfs import register_ai_functions
        from coco_sql.llm.runtime import AiRuntime

        if self._functions is None:
            self._functions = AiFunctions(AiRuntime(self.config))
        register_ai_functions(con, self._functions)

    def billed_model(self, function: str, model: str | None) -> str:
        """The model the stand-in answers `function` with, named as the DuckDB path's usage names it."""
        config = self.config
        if function in ("AI_CLASSIFY", "AI_FILTER"):
            return config.classify_model
        return config.resolve(model or config.embedding_model)


class WarehouseCandidates(MeteredQueries):
    """A `store.base.CandidateEngine` over a Snowpark session (module docstring); its candidate runner API is
    `MeteredQueries`."""

    dialect = "snowflake"

    def __init__(self, session: Session, queries: CandidateSql | None = None) -> None:
        self._session = session
        self._queries = queries if queries is not None else default_queries(session)

    def stage_rows(self, split: str, rows: pd.DataFrame) -> str:
        name = f"COCO_INPUT_{split.upper()}_{uuid.uuid4().hex[:12].upper()}"
        frame = rows.copy()
        frame.columns = [str(c).upper() for c in frame.columns]
        self._session.create_dataframe(frame).write.save_as_table(
            name, mode="overwrite", table_type="temporary"
        )
        return name

    def query(self, sql: str, deadline_s: float) -> QueryRows:
        try:
            return self._queries(sql, timeout_s=deadline_s)
        except EvaluationError:
            raise
        except Exception as error:  # the engine's own error type differs between executors
            raise EvaluationError(_first_line(error)) from None

    def create_table(self, sql: str, deadline_s: float) -> str:
        """`CREATE TEMPORARY TABLE ... AS` the query on an account; in local testing, the query's rows saved as a
        temporary table through Snowpark (`LocalQueries.create_table`)."""
        name = f"COCO_MODEL_{uuid.uuid4().hex[:12].upper()}"
        local = getattr(self._queries, "create_table", None)
        try:
            if local is not None:
                local(name, sql, timeout_s=deadline_s)
            else:
                self._queries(f"CREATE TEMPORARY TABLE {name} AS {sql}", timeout_s=deadline_s)
        except EvaluationError:
            raise
        except Exception as error:  # the engine's own error type differs between executors
            raise EvaluationError(_first_line(error)) from None
        return name

    def run_python(self, source: str, staged: str, deadline_s: float) -> list[tuple[str, str | None]]:
        """(id, the UDF's JSON answer) for every row of `staged` (columns ID, INSTANCE), from a temporary Python
        UDF whose code is `source` (defining `base.PYTHON_HANDLER(instance)`), created for this call and dropped
        after it. On an account one query runs it; local testing runs it through Snowpark's DataFrame API."""
        name = f"COCO_PY_{uuid.uuid4().hex[:12].upper()}"
        self._create_python(name, source)
        try:
            if not is_local(self._session):
                found = self.query(f"SELECT ID, {name}(INSTANCE) AS RESULT FROM {staged}", deadline_s)
                return [(str(row[0]), row[1]) for row in found.rows]
            from snowflake.snowpark.functions import call_udf, col

            frame = self._session.table(staged).select(col("ID"), call_udf(name, col("INSTANCE")))
            return [(str(row[0]), row[1]) for row in frame.collect()]
        except EvaluationError:
            raise
        except Exception as error:  # the engine's own error type
            raise EvaluationError(_first_line(error)) from None
        finally:
            self._drop_python(name)

    def drop_staged(self, name: str) -> None:
        self._session.table(name).drop_table()
        forget = getattr(self._queries, "forget", None)
        if forget is not None:
            forget(name)

    def billed_model(self, function: str, model: str | None) -> str:
        """The model a metered AI call is recorded under: Cortex's (`cortex:<model>`, or `cortex:<function>` when
        the call names none), or in local testing the stand-in's."""
        named = getattr(self._queries, "billed_model", None)
        if named is not None:
            return named(function, model)
        return f"cortex:{model or function.lower()}"

    # -- Python UDFs -------------------------------------------------------------------------------------------
    def _create_python(self, name: str, source: str) -> None:
        """On an account, CREATE TEMPORARY FUNCTION with the source inline (no pickle, no stage: PUT is not
        allowed in a procedure); in local testing, the same source's handler registered through Snowpark."""
        from snowflake.snowpark.types import StringType

        if is_local(self._session):
            from coco_sql.engines.snowflake.kept_modules import keeping_imports

            namespace: dict[str, Any] = {"__name__": name}
            exec(compile(source, name, "exec"), namespace)  # the adapter only: the program runs in the UDF
            self._session.udf.register(
                keeping_imports(namespace[PYTHON_HANDLER]), return_type=StringType(), input_types=[StringType()],
                is_permanent=False, name=name, replace=True,
            )  # fmt: skip
            return
        packages = ", ".join(f"'{p}'" for p in PYTHON_PACKAGES)
        self._queries(
            f"CREATE TEMPORARY FUNCTION {name}(instance VARCHAR) RETURNS VARCHAR LANGUAGE PYTHON "
            f"RUNTIME_VERSION = '3.11' PACKAGES = ({packages}) HANDLER = '{PYTHON_HANDLER}' AS $$\n{source}\n$$",
            timeout_s=60.0,
        )

    def _drop_python(self, name: str) -> None:
        if not is_local(self._session):
            self._queries(f"DROP FUNCTION IF EXISTS {name}(VARCHAR)", timeout_s=60.0)


def default_queries(session: Session) -> CandidateSql:
    """`SessionQueries` on an account; `LocalQueries` in local testing, which has no SQL."""
    return LocalQueries(session) if is_local(session) else SessionQueries(session)


def local_schema(columns: list[str], types: tuple[str, ...]) -> Any:
    """A Snowpark schema for rows DuckDB typed (local testing): numbers, text, booleans, dates and timestamps as
    such, lists as ARRAY, anything else as VARIANT."""
    from snowflake.snowpark import types as t

    fields = []
    for column, kind in zip(columns, types, strict=True):
        upper = kind.upper()
        decimal = upper.startswith("DECIMAL(") and upper.rstrip(")").split("(")[1].split(",")
        if decimal:
            datatype: Any = t.DecimalType(int(decimal[0]), int(decimal[1]))
        elif upper.endswith("]"):
            datatype = t.ArrayType()
        elif upper.startswith("TIMESTAMP"):  # TIMESTAMP, _S, _MS, _NS, WITH TIME ZONE
            zoned = "TIME ZONE" in upper or upper.endswith("TZ")
            datatype = t.TimestampType(t.TimestampTimeZone.TZ if zoned else t.TimestampTimeZone.NTZ)
        else:
            datatype = {"BOOLEAN": t.BooleanType(), "DOUBLE": t.DoubleType(), "FLOAT": t.DoubleType(),
                        "REAL": t.DoubleType(), "VARCHAR": t.StringType(), "DATE": t.DateType(),
                        "TIME": t.TimeType()}.get(upper)  # fmt: skip
            if datatype is None:
                datatype = t.LongType() if upper in _INTEGERS else t.VariantType()
        fields.append(t.StructField(column, datatype, nullable=True))
    return t.StructType(fields)


def _tables_read(tree: exp.Expression) -> set[str]:
    names: set[str] = set()
    for scope in traverse_scope(tree):
        for source in scope.tables:
            if source.name not in scope.cte_sources:
                names.add(source.name)
    return names


def _cell(value: Any, kind: str) -> Any:
    """A value as DuckDB would give it: an ARRAY or VECTOR as a list, a whole NUMBER as an int."""
    if kind in _JSON_TYPES and isinstance(value, str):
        return json.loads(value)
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _column_name(name: str) -> str:
    return name.lower() if name.isupper() else name


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
