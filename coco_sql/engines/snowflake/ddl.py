"""The schema DDL (`store.schema`, DuckDB dialect) as Snowflake statements: the Snowflake engine's `ddl` part.

Snowflake gets sqlglot's translation plus the small fixups below, and only for constructs whose translation was
checked; any other type or function in the DDL raises `StoreError` (and fails `tests/test_deploy.py`) instead of reaching a warehouse untested:

    types      SNOWFLAKE_TYPES: DuckDB type -> Snowflake spelling, or None where sqlglot's own is right
               (JSON -> VARIANT, TIMESTAMP -> TIMESTAMPNTZ, DOUBLE stays DOUBLE, a synonym of FLOAT)
               FLOAT[] -> ARRAY: sqlglot writes the structured type ARRAY(FLOAT), not the semi-structured
               ARRAY that every Snowflake table takes and the store writes
               HUGEINT, UBIGINT, UUID -> NUMBER(38, 0), NUMBER(20, 0), VARCHAR(36): sqlglot keeps DuckDB's names
    functions  SNOWFLAKE_FUNCTIONS: the sqlglot nodes whose Snowflake form was checked
               len(list) -> ARRAY_SIZE (sqlglot writes LENGTH, a string function in Snowflake)
               epoch_ms(timestamp) -> DATE_PART(EPOCH_MILLISECOND, ...) (sqlglot reads every epoch_ms as
               epoch_ms(milliseconds) and writes TO_TIMESTAMP(x, 3)); epoch_ms(integer) -> TO_TIMESTAMP_NTZ(x, 3)
               Both need the argument's type: a literal, a CAST, or a column of the same type in every table.
               SUM, COALESCE, CAST, AND, OR, RANK, ROW_NUMBER and array constants are written alike in both.
    comments   the comments before a statement are dropped; comments on columns stay
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from coco_sql.errors import StoreError
from coco_sql.store.schema import schema_expressions

T = exp.DataType.Type
SNOWFLAKE_TYPES: dict[exp.DataType.Type, str | None] = {
    T.BIGINT: None,
    T.INT: None,
    T.SMALLINT: None,
    T.VARCHAR: None,
    T.TEXT: None,  # DuckDB's VARCHAR is read as TEXT and written as VARCHAR
    T.DOUBLE: None,
    T.FLOAT: None,  # DuckDB's FLOAT/REAL, written as FLOAT
    T.BOOLEAN: None,
    T.DATE: None,
    T.JSON: None,  # VARIANT
    T.TIMESTAMP: None,  # TIMESTAMPNTZ
    T.TIMESTAMPNTZ: None,
    T.ARRAY: "ARRAY",
    T.INT128: "NUMBER(38, 0)",  # DuckDB's HUGEINT
    T.UBIGINT: "NUMBER(20, 0)",
    T.UUID: "VARCHAR(36)",
}
_LIST_TYPES = (T.ARRAY, T.LIST)
_INTEGER_TYPES = (T.TINYINT, T.SMALLINT, T.INT, T.BIGINT, T.INT128, T.UBIGINT)
_TIMESTAMP_TYPES = (T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMPTZ)


def snowflake_schema() -> list[str]:
    """The schema's statements (`sql/`) as Snowflake runs them: what `coco-sql deploy` creates."""
    return snowflake_statements(schema_expressions())


def snowflake_statements(expressions: list[exp.Expression]) -> list[str]:
    """DuckDB DDL `expressions` as Snowflake statements, with the fixups; StoreError for an unchecked construct.
    The types of the tables' columns (for len and epoch_ms) come from the CREATE TABLEs among `expressions`."""
    columns = _column_types(expressions)
    return [_for_snowflake(expression, columns).sql(dialect="snowflake") for expression in expressions]


def unchecked_constructs(expression: exp.Expression) -> list[str]:
    """The types and functions in `expression` that no entry of this module's tables covers."""
    found = [
        f"type {node.this.value}"
        for node in expression.find_all(exp.DataType)
        if node.this not in SNOWFLAKE_TYPES and not _is_nested_type(node)
    ]
    found += [
        f"function {node.sql(dialect='duckdb').split('(')[0]}"
        for node in expression.find_all(exp.Func)
        if type(node) not in SNOWFLAKE_FUNCTIONS
    ]
    return sorted(set(found))


def _is_nested_type(node: exp.DataType) -> bool:
    """The element type of an ARRAY: dropped with it, since Snowflake's ARRAY is untyped."""
    return isinstance(node.parent, exp.DataType) and node.parent.this in _LIST_TYPES


def _for_snowflake(expression: exp.Expression, columns: dict[str, exp.DataType | None]) -> exp.Expression:
    unchecked = unchecked_constructs(expression)
    if unchecked:
        raise StoreError(
            f"schema statement {_name(expression)} uses {', '.join(unchecked)}, whose Snowflake translation "
            "is not checked: add it to coco_sql/engines/snowflake/ddl.py"
        )
    expression = expression.copy()
    expression.comments = None
    return expression.transform(lambda node: _fixup(node, columns), copy=False)


def _fixup(node: exp.Expression, columns: dict[str, exp.DataType | None]) -> exp.Expression:
    if isinstance(node, exp.DataType) and not _is_nested_type(node):
        spelling = SNOWFLAKE_TYPES.get(node.this)
        return exp.DataType.build(spelling, dialect="snowflake") if spelling else node
    rewrite = SNOWFLAKE_FUNCTIONS.get(type(node))
    return rewrite(node, columns) if rewrite is not None else node


def _len(node: exp.Expression, columns: dict[str, exp.DataType | None]) -> exp.Expression:
    kind = _argument_type(node.this, columns, node)
    return exp.ArraySize(this=node.this) if kind.this in _LIST_TYPES else node


def _epoch_ms(node: exp.Expression, columns: dict[str, exp.DataType | None]) -> exp.Expression:
    if node.args.get("scale") is None or node.args["scale"].name != "3":
        raise StoreError(
            f"schema: {node.sql(dialect='duckdb')} is not epoch_ms; its translation is not checked"
        )
    kind = _argument_type(node.this, columns, node)
    if kind.this in _TIMESTAMP_TYPES:
        return exp.Anonymous(this="DATE_PART", expressions=[exp.var("EPOCH_MILLISECOND"), node.this])
    if kind.this in _INTEGER_TYPES:
        return exp.Anonymous(this="TO_TIMESTAMP_NTZ", expressions=[node.this, exp.Literal.number(3)])
    raise StoreError(f"schema: {node.sql(dialect='duckdb')}: epoch_ms of {kind.sql()} is not checked")


def _keep(node: exp.Expression, columns: dict[str, exp.DataType | None]) -> exp.Expression:
    return node


Fixup = Callable[[exp.Expression, dict[str, exp.DataType | None]], exp.Expression]
SNOWFLAKE_FUNCTIONS: dict[type[exp.Expression], Fixup] = {
    exp.And: _keep,  # a connector, but a Func to sqlglot
    exp.Array: _keep,  # [1, 2]: an array constant in both
    exp.Or: _keep,
    exp.Cast: _keep,
    exp.Coalesce: _keep,  # COALESCE in both
    exp.Sum: _keep,  # SUM in both
    exp.Rank: _keep,
    exp.RowNumber: _keep,
    exp.Length: _len,
    exp.UnixToTime: _epoch_ms,
}


def _argument_type(
    argument: exp.Expression, columns: dict[str, exp.DataType | None], call: exp.Expression
) -> exp.DataType:
    """The DuckDB type of a function argument, when the DDL alone says it; StoreError otherwise."""
    if isinstance(argument, exp.Cast):
        return argument.to
    if isinstance(argument, exp.Array):
        return exp.DataType.build("ARRAY")
    if isinstance(argument, exp.Literal):
        return exp.DataType.build("VARCHAR" if argument.is_string else "BIGINT")
    if isinstance(argument, exp.Column) and columns.get(argument.name) is not None:
        return columns[argument.name]  # type: ignore[return-value]
    raise StoreError(
        f"schema: cannot tell the type of {argument.sql(dialect='duckdb')} in {call.sql(dialect='duckdb')} "
        "for Snowflake: cast it, or give the column one type in every table"
    )


def _column_types(expressions: list[exp.Expression]) -> dict[str, exp.DataType | None]:
    """Column name -> its type in every CREATE TABLE that has it; None when the tables disagree."""
    types: dict[str, exp.DataType | None] = {}
    for expression in expressions:
        if not (isinstance(expression, exp.Create) and expression.kind == "TABLE"):
            continue
        for column in expression.find_all(exp.ColumnDef):
            kind = column.args.get("kind")
            if column.name in types and (kind is None or types[column.name] != kind):
                types[column.name] = None
            elif column.name not in types:
                types[column.name] = kind
    return types


def _name(expression: exp.Expression) -> str:
    table = expression.find(exp.Table)
    return table.name if table is not None else expression.sql(dialect="duckdb")[:60]
