"""Literal SQL values as Python values and back: arrays, structs (DuckDB `{...}`, Snowflake OBJECT_CONSTRUCT),
strings, numbers, booleans and NULL. What the AI-pipeline edits read and write as a call's arguments, and what
the warehouse meter reads of an AI_CLASSIFY call's categories and examples."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlglot import exp


def to_python(node: exp.Expression | None) -> Any:
    """The value of a literal argument: strings, numbers, booleans, NULL, arrays and structs of them."""
    if node is None or isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Paren):
        return to_python(node.this)
    if isinstance(node, exp.Array):
        return [to_python(item) for item in node.expressions]
    if isinstance(node, exp.Struct):
        out: dict[str, Any] = {}
        for item in node.expressions:
            if isinstance(item, exp.PropertyEQ | exp.Slice | exp.EQ):
                out[item.this.name] = to_python(item.expression)
            else:
                raise ValueError(f"not a literal struct field: {item.sql()}")
        return out
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Literal):
        return node.this if node.is_string else float(node.this) if "." in node.this else int(node.this)
    raise ValueError(f"not a literal: {node.sql()}")


def to_node(value: Any) -> exp.Expression:
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, int | float):
        return exp.Literal.number(value)
    if isinstance(value, str):
        return exp.Literal.string(value)
    if isinstance(value, list | tuple):
        return exp.Array(expressions=[to_node(v) for v in value])
    if isinstance(value, Mapping):
        return exp.Struct(
            expressions=[
                exp.PropertyEQ(this=exp.to_identifier(k), expression=to_node(v)) for k, v in value.items()
            ]
        )
    raise TypeError(f"cannot write {type(value).__name__} as a SQL literal")
