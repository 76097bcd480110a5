"""`LocalWrites`: the SnowparkStore's INSERT ALL (`batch`) in Snowpark's local testing mode, which has no
`session.sql`. An account runs the statement itself (`SessionWrites`); the local test suite runs this emulation.

Only Snowflake's unconditional-kind multi-table insert is taken (`INSERT ALL WHEN c THEN INTO t (cols) VALUES
(source columns) ... SELECT ...`); anything else is refused. One query over the statement's source computes every
branch's condition and VALUES (`SELECT COALESCE(<condition>, FALSE) AS w0, <its values> ..., FROM (<source>)`),
run by the read executor (`LocalSql`: the Snowflake SQL on DuckDB over the session's tables); each branch's rows
are then appended to its table with the DataFrame API, each value converted to its column's Snowpark type. A
statement whose query fails writes nothing. One fix-up before translation: `CAST(x AS ARRAY)` becomes `x`, because sqlglot writes it for DuckDB as
`CAST(x AS [])`; the append converts the value to the ARRAY column anyway.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pandas as pd
import sqlglot
from sqlglot import exp

from coco_sql.engines.snowflake.sql import SqlExecutor

if TYPE_CHECKING:
    from snowflake.snowpark import Session
    from snowflake.snowpark.types import DataType, StructType


class LocalWrites:
    """Snowflake INSERT ALL statements over a local-testing session (module docstring)."""

    def __init__(self, session: Session, read: SqlExecutor | None = None) -> None:
        from coco_sql.engines.snowflake.local import LocalSql

        self._session = session
        self._read = read if read is not None else LocalSql(session)
        self._schemas: dict[str, StructType] = {}  # table -> its Snowpark schema, read once

    def __call__(self, statement: str) -> None:
        tree = sqlglot.parse_one(statement, read="snowflake")
        if not isinstance(tree, exp.MultitableInserts) or str(tree.args.get("kind")).upper() != "ALL":
            raise ValueError(f"local testing writes INSERT ALL statements only, not {type(tree).__name__}")
        source = tree.args["source"].transform(_drop_array_cast)
        branches, selects = [], []
        for k, branch in enumerate(tree.expressions):
            insert, condition = branch.this, branch.expression
            if branch.args.get("else_") or condition is None:
                raise ValueError("local testing writes INSERT ALL with a WHEN condition on every branch")
            schema, values = insert.this, insert.expression.expressions[0].expressions
            selects.append(
                exp.alias_(exp.Coalesce(this=condition.copy(), expressions=[exp.false()]), f"w{k}")
            )
            selects += [exp.alias_(value.copy(), f"c{k}_{j}") for j, value in enumerate(values)]
            branches.append((schema.this.name, [identifier.name for identifier in schema.expressions]))
        alias = exp.TableAlias(this=exp.to_identifier("s"))
        query = exp.select(*selects).from_(exp.Subquery(this=source, alias=alias))
        frame = self._read(query.sql(dialect="snowflake")).frame  # every branch in one query
        for k, (table, columns) in enumerate(branches):
            rows = frame[frame[f"w{k}"].astype(bool)]
            if len(rows):
                part = rows[[f"c{k}_{j}" for j in range(len(columns))]]
                self._append(table, columns, part)

    def _append(self, table: str, columns: list[str], frame: pd.DataFrame) -> None:
        if table not in self._schemas:
            self._schemas[table] = self._session.table(table).schema
        target = self._schemas[table]
        where = {c.upper(): k for k, c in enumerate(columns)}
        picks = [where.get(f.name.upper()) for f in target.fields]
        rows = [
            [
                None if k is None else _value(row[k], f.datatype)
                for k, f in zip(picks, target.fields, strict=True)
            ]
            for row in frame.itertuples(index=False, name=None)
        ]
        self._session.create_dataframe(rows, schema=target).write.save_as_table(
            table, mode="append", table_exists=True
        )


def _drop_array_cast(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.ARRAY:
        return node.this
    return node


def _value(value: Any, datatype: DataType) -> Any:
    """A DuckDB result value as Snowpark takes it for a column of `datatype`."""
    from snowflake.snowpark import types as t

    if value is None or value is pd.NaT or (isinstance(value, float) and value != value):
        return None
    if hasattr(value, "to_pydatetime"):
        value = value.to_pydatetime()
    elif hasattr(value, "item"):
        value = value.item()
    if isinstance(datatype, t.VariantType | t.ArrayType | t.MapType) and isinstance(value, str):
        return json.loads(value)
    if isinstance(datatype, t.ArrayType) and hasattr(value, "tolist"):
        return value.tolist()
    return value
