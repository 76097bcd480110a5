"""The dbt repair mutator's edit of an AI step: an AI_CLASSIFY whose label set lacks labels its pipeline counts.

A mart scored per key rarely says which comment was misclassified, so the SQL kind's per-row AI edits (few-shot
examples, descriptions, guards: `languages.sql.mutate.ai_edits`) have no gold labels to work from here. What the project
itself says is enough for one repair: a downstream model compares the classified column with string literals
(`count_if(sentiment = 'neutral')`, `sentiment in ('a', 'b')`), and a literal the call's categories do not hold
can never be returned, so every column counting it is stuck at zero. The edit appends those labels to the
call's literal category list, proposed only when a column fed by such a comparison mismatches on training keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from sqlglot import exp

from coco_sql.sqlkit.ai_classify import ClassifySpec, classify_calls, read_spec, set_spec

if TYPE_CHECKING:
    from coco_sql.languages.dbt.evidence import Evidence
    from coco_sql.languages.dbt.repairs import Repair
    from coco_sql.languages.dbt.sql_files import EditableFile

LABEL_WEIGHT = 3.5  # above a CASE pass-through, a grain edit and a dropped filter: a label never returned zeroes its counts


def label_edits(files: dict[str, EditableFile], evidence: Evidence) -> Iterator[Repair]:
    """A repair for each AI_CLASSIFY call whose output is compared downstream with labels it lacks, when a column
    those comparisons feed mismatches in `evidence`: the call's text replaced by the call with the labels added."""
    from coco_sql.languages.dbt.repairs import Repair

    trees = {path: f.sql.tree for path, f in files.items() if f.sql is not None}
    for path, tree in trees.items():
        file = files[path]
        for call in classify_calls(tree):
            spec, output = read_spec(call), _output_name(call)
            if spec is None or output is None or file.sql is None:
                continue
            compared = _compared_labels(trees, output)
            missing = [label for label in compared if label not in spec.labels]
            fed = {column for label in missing for column in compared[label]}
            wrong = fed & set(evidence.columns)
            if not missing or not wrong:
                continue
            edited = call.copy()
            set_spec(edited, ClassifySpec(spec.categories + missing, spec.config))
            change = file.sql.replace_node(call, edited.sql(dialect=file.sql.dialect))
            if change is None:
                continue
            weight = LABEL_WEIGHT + sum(evidence.columns[c] for c in wrong) / 1000
            approach = f"add labels {', '.join(missing)} to AI_CLASSIFY of {file.name}.{output} (label set)"
            yield Repair(path, (change,), approach, weight)


def _output_name(call: exp.Expression) -> str | None:
    """The name of the projection the call's answer becomes (`... as sentiment`), if it is one."""
    node: exp.Expression | None = call
    while node is not None and not (isinstance(node, exp.Alias) and isinstance(node.parent, exp.Select)):
        if isinstance(node, (exp.Select, exp.Subquery)):
            return None
        node = node.parent
    return node.alias if node is not None else None


def _compared_labels(trees: dict[str, exp.Expression], column: str) -> dict[str, set[str]]:
    """Each string literal compared with a column named `column` in any model -> the output columns it feeds."""
    found: dict[str, set[str]] = {}
    for tree in trees.values():
        for literal, node in _comparisons(tree, column):
            owner = node.find_ancestor(exp.Alias)
            if owner is not None and isinstance(owner.parent, exp.Select):
                found.setdefault(literal, set()).add(owner.alias)
            else:
                found.setdefault(literal, set())
    return found


def _comparisons(tree: exp.Expression, column: str) -> Iterator[tuple[str, exp.Expression]]:
    """(literal, comparison) for `column = 'x'`, `'x' = column` and `column IN ('x', ...)` in `tree`."""
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.In):
        if isinstance(node, exp.In):
            if _is_column(node.this, column):
                for value in node.expressions:
                    if isinstance(value, exp.Literal) and value.is_string:
                        yield value.this, node
            continue
        for side, other in ((node.this, node.expression), (node.expression, node.this)):
            if _is_column(side, column) and isinstance(other, exp.Literal) and other.is_string:
                yield other.this, node


def _is_column(node: exp.Expression, name: str) -> bool:
    return isinstance(node, exp.Column) and node.name == name
