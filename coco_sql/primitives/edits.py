"""The edits operators use to move primitives between programs: add the definitions a program calls, prune the
ones it no longer calls, rename the calls of one primitive to another, and refactor a sub-expression into a call
(PACE's P1/P2 mechanics; each kind's forms are its adapter's: `languages.sql.pace_edits`,
`languages.python.pace_defs`)."""

from __future__ import annotations

from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.primitives.calls import adapter, call_set, definitions
from coco_sql.primitives.library import Primitive, PrimitiveLibrary


def with_definitions(
    code: str,
    language: str,
    primitives: list[Primitive] | tuple[Primitive, ...],
    *,
    dialect: str = SANDBOX_DIALECT,
) -> str:
    """`code` carrying the definitions of `primitives` it does not define yet (by name). SQL: their CREATE MACRO
    statements before the program's; Python: their imports and defs after the module's docstring and imports.
    A definition already present is left as it is (`contracts.verify` reports it if it is not the library's)."""
    return adapter(language).with_definitions(code, primitives, dialect=dialect)


def prune_definitions(
    code: str, language: str, library: PrimitiveLibrary, *, dialect: str = SANDBOX_DIALECT
) -> str:
    """`code` without the definitions of library primitives it no longer calls."""
    names = library.names(language)
    calls = call_set(code, language, names, dialect=dialect)
    unused = set(definitions(code, language, dialect=dialect)) & (set(names) - calls)
    if not unused:
        return code
    return adapter(language).remove_definitions(code, unused, dialect=dialect)


def arity(primitive: Primitive) -> int:
    """The number of parameters in a primitive's signature `p_x(a, b)`."""
    inside = primitive.signature.partition("(")[2].rstrip().removesuffix(")")
    return len([p for p in inside.split(",") if p.strip()])


def replace_calls(
    code: str, language: str, target: Primitive, replacement: Primitive, *, dialect: str = SANDBOX_DIALECT
) -> str | None:
    """`code` with every call of `target` renamed to `replacement` (P2's mechanical core), or None when the two
    take different numbers of arguments or `code` does not call `target`. Definitions are not touched: follow
    with `with_definitions` and `prune_definitions`."""
    if arity(target) != arity(replacement) or target.language != replacement.language:
        return None
    return adapter(language).replace_calls(code, target, replacement, dialect=dialect)
