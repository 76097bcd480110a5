"""Reading a sqlglot call node the same way everywhere: the name it was written with, its arguments in order."""

from __future__ import annotations

from sqlglot import exp


def function_name(node: exp.Func) -> str:
    """The upper-case name a call was written with (Anonymous) or sqlglot's canonical name (typed node)."""
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    return node.sql_name().upper()


def positional_arguments(node: exp.Func) -> list[exp.Expression]:
    """A call's arguments in written order, dropping non-argument flags (booleans/strings in ``.args``)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    values: list[exp.Expression] = []
    for key in node.arg_types:
        value = node.args.get(key)
        if isinstance(value, exp.Expression):
            values.append(value)
        elif isinstance(value, list):
            values.extend(v for v in value if isinstance(v, exp.Expression))
    return values
