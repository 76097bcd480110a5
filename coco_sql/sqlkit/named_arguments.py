"""AI function calls with named arguments (``AI_COMPLETE(model => 'x', prompt => p)``) made positional: DuckDB's
Python UDFs bind positional arguments only, so every engine's program is rewritten, skipped optional parameters
padded with NULL (the signatures: :data:`~coco_sql.sqlkit.allowlist.AI_SIGNATURES`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.sqlkit.ai_catalogue import BY_NAME as AI_FUNCTIONS
from coco_sql.sqlkit.ai_catalogue import check_named_argument
from coco_sql.sqlkit.allowlist import AI_SIGNATURES
from coco_sql.sqlkit.nodes import function_name, positional_arguments

if TYPE_CHECKING:
    from coco_sql.engines import AiBinding


def rewrite_named_arguments(tree: exp.Expression, ai: AiBinding | None = None) -> exp.Expression:
    """Rewrite ``AI_X(name => value, ...)`` into positional calls (fix-up c); other calls are left alone.

    Names are Snowflake's documented ones (:mod:`coco_sql.sqlkit.ai_catalogue`), in any case. Where the engine's
    AI functions take Cortex's names only (`ai.cortex_names_only`: Snowflake) a name only this project used to
    accept (``categories =>``) is refused with the documented one, because the warehouse would refuse the
    deployed program; elsewhere (`ai` None: DuckDB) it still binds."""
    for node in list(tree.find_all(exp.Func)):
        name = function_name(node)
        signature = AI_SIGNATURES.get(name)
        if signature is None:
            continue
        args = positional_arguments(node)
        if not any(isinstance(a, exp.Kwarg) for a in args):
            continue
        slots = _named_slots(name, args, ai)
        missing = [p for i, p in enumerate(signature.params[: signature.required]) if i not in slots]
        if missing:
            raise CandidateRejected(f"{name} is missing required parameter(s): {', '.join(missing)}")
        positional = [slots.get(i, exp.null()) for i in range(max(slots) + 1)]
        replacement = exp.Anonymous(this=name, expressions=positional)
        if node is tree:
            tree = replacement  # the whole program is this call (a bare expression)
        else:
            node.replace(replacement)
    return tree


def _named_slots(name: str, args: list[exp.Expression], ai: AiBinding | None) -> dict[int, exp.Expression]:
    """Position -> argument of one AI call whose arguments are positional, then named. Raises
    CandidateRejected for an unknown name, a name given twice, or a local-only name where `ai` takes Cortex's names only."""
    function = AI_FUNCTIONS[name]
    slots: dict[int, exp.Expression] = {}
    for position, arg in enumerate(args):
        if not isinstance(arg, exp.Kwarg):
            if slots and max(slots) >= position:
                raise CandidateRejected(f"{name}: a positional argument follows a named argument")
            slots[position] = arg
            continue
        key = arg.this.name
        refused = check_named_argument(name, key, ai)
        index = function.position(key)
        if refused is not None or index is None:
            raise CandidateRejected(refused or f"{name} has no parameter named {key!r}")
        if index in slots:
            raise CandidateRejected(f"{name}: parameter {function.params[index].name!r} is given twice")
        slots[index] = arg.expression
    return slots
