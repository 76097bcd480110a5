"""The output column's shape against the task's label type: a program that returns an AI function's whole answer
(an object) where the task's label is a string, a list or a number is refused in one line that says what to
write instead.

Why (issue 38): a seed `SELECT id, AI_CLASSIFY(text, ['a', 'b']) AS label FROM input` registered, ran and scored
0.000 on every row, with no hint: the answer is the object `{"labels": ["a"]}`, and its text never equals a
label. The check is narrow on purpose, so that it never refuses a program that could score: it looks only at the
outermost SELECT's output column, and only at a call written there directly (alone, or cast to text), whose
function answers an object (`sqlkit.ai_catalogue`: a JSON return). A call whose field is read (`:labels[0]`,
`->>'$.labels[0]'`), a CASE, a column of a CTE pass.
"""

from __future__ import annotations

from sqlglot import exp

from coco_sql.sqlkit.ai_catalogue import BY_NAME as AI_FUNCTIONS
from coco_sql.sqlkit.rejection import reject

_TEXT_TYPES = frozenset(
    {exp.DataType.Type.VARCHAR, exp.DataType.Type.TEXT, exp.DataType.Type.CHAR, exp.DataType.Type.NVARCHAR}
)
# function -> (contract type -> the field to read, in Snowflake's and in DuckDB's spelling)
_FIELDS: dict[str, dict[str, tuple[str, str]]] = {
    "AI_CLASSIFY": {
        "VARCHAR[]": (":labels", "->'$.labels'"),
        "": (":labels[0]::string", "->>'$.labels[0]'"),
    },
    "AI_SENTIMENT": {"": (":categories[0]:sentiment::string", "->'$.categories'->0->>'sentiment'")},
    "SNOWFLAKE.CORTEX.CLASSIFY_TEXT": {"": (":label::string", "->>'$.label'")},
}


def check_output_shape(
    query: exp.Expression, output_column: str, output_type: str, variant_paths: bool
) -> None:
    """CandidateRejected when the outermost SELECT's `output_column` is an AI call's whole object (module
    docstring) while the task's label is `output_type` (a contract type); the fix is spelled with a VARIANT path
    (`:label::string`, `variant_paths`: the engine's programs are translated) or DuckDB's JSON operator."""
    if not isinstance(query, exp.Select):
        return
    for projection in query.expressions:
        if projection.alias_or_name.lower() != output_column.lower():
            continue
        node = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(node, exp.Cast) and node.to.this in _TEXT_TYPES:
            node = node.this
        name = _object_answer(node)
        if name is not None:
            raise reject(_message(name, output_column, output_type, variant_paths))


def _object_answer(node: exp.Expression) -> str | None:
    """The AI function `node` calls when its answer is an object (a JSON return), else None."""
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        parts = [p.name for p in node.this.flatten()] if isinstance(node.this, exp.Dot) else [node.this.name]
        name = ".".join([*parts, node.expression.name]).upper()
    elif isinstance(node, exp.Anonymous):
        name = node.name.upper()
    elif isinstance(node, exp.Func):
        name = next((n.upper() for n in node.sql_names() if n.upper() in AI_FUNCTIONS), "")
    else:
        return None
    function = AI_FUNCTIONS.get(name)
    if function is None or function.udf is None or not function.udf.returns.json:
        return None
    return name


def _message(name: str, output_column: str, output_type: str, variant_paths: bool) -> str:
    fields = _FIELDS.get(name, {})
    path, json_operator = fields.get(output_type.upper(), fields.get("", ("", "")))
    written = path if variant_paths else json_operator
    fix = (
        f"write {name}(...){written} AS {output_column}"
        if written
        else f"read the field that holds the answer, e.g. {name}(...):<field>::string AS {output_column}"
    )
    return (
        f"the output column {output_column!r} is the whole {name} object, but the task's label is "
        f"{output_type}: {fix}"
    )
