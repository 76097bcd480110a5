"""Project edits for the dbt repair mutator: what mismatching rows suggest, as concrete project changes.

`Evidence` reads a program's training outcome (each row instance's output and expected JSON): which columns
mismatch, by what ratio, which category values are swapped, which rows are missing, extra or null.
`hypotheses` turns it into edits of the models the targets read and of the macros those models call, each a
few token changes of the file as written (`sql_files` masks the Jinja, `sqlkit.spans` maps the tree back to
the text: formatting, comments and casts stay): `repairs` (CASE mappings and WHEN conditions, grains, format
strings, windows, aggregates, arithmetic, macro literals), `repairs_rows` (join kinds, keys and conditions,
filters, GROUP BY columns, unit scaling, COALESCE) and an AI_CLASSIFY's missing labels (`ai_labels`). A model
no target reads is never edited. Edits touch only what feeds a mismatching column (a lineage by name across
models), ranked by how much evidence points at them.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from coco_sql.languages.dbt.ai_labels import label_edits
from coco_sql.languages.dbt.evidence import Evidence
from coco_sql.languages.dbt.project import DbtProject, upstream_models
from coco_sql.languages.dbt.repairs import Repair, Scope, expression_repairs, macro_repairs, projections
from coco_sql.languages.dbt.repairs_rows import relation_columns, row_repairs
from coco_sql.languages.dbt.sql_files import EditableFile, macro_calls, macro_file, model_file
from coco_sql.languages.dbt.validate import ValidatedProject
from coco_sql.sqlkit.spans import SpannedSql, apply


@dataclass(frozen=True)
class Edit:
    approach: str
    code: str
    weight: float


def editable_files(
    project: DbtProject, targets: Sequence[str] | None, dialect: str
) -> dict[str, EditableFile]:
    """The models the `targets` read (all models when None) and the macro files whose macros they call."""
    models = project.models()
    scope = upstream_models(project, targets) if targets else set(models)
    files = {
        models[m]: model_file(models[m], project.files[models[m]], dialect)
        for m in sorted(scope)
        if m in models
    }
    called = set().union(*(macro_calls(f.text) for f in files.values())) if files else set()
    for path in project.paths("macros/", ".sql"):
        macro = macro_file(path, project.files[path])
        if set(macro.macros) & called:
            files[path] = macro
    return files


def implicated(
    project: DbtProject, evidence: Evidence, targets: Sequence[str] | None
) -> dict[str, tuple[float, float]]:
    """Model -> (how off, how many rows off) the targets it feeds are: the worst of them (`Evidence.off`)."""
    found: dict[str, tuple[float, float]] = {}
    for target in targets or list(evidence.rows):
        off = evidence.off(target)
        for model in upstream_models(project, [target]):
            known = found.get(model, (0.0, 0.0))
            found[model] = (max(known[0], off[0]), max(known[1], off[1]))
    return found


def scope_of(files: dict[str, EditableFile], evidence: Evidence, keys: Sequence[str],
             models: dict[str, tuple[float, float]] | None = None,
             target_keys: Mapping[str, Sequence[str]] | None = None,
             rendered: Sequence[exp.Expression] = (),
             downstream: Mapping[str, float] | None = None) -> Scope:  # fmt: skip
    """Which projections the evidence points at: a mismatching column weighs its share of the mismatches, and so
    does every projection that feeds it (by name, across models; `rendered`: the models' checked queries, whose
    Jinja-made columns the files as written hide)."""
    total = sum(evidence.columns.values()) or 1
    lineage = _lineage(files, rendered)
    weights: dict[str, float] = {}
    for column, count in evidence.columns.items():
        for name in _closure(lineage, {column}):
            weights[name] = weights.get(name, 0.0) + count / total + (1.0 if name == column else 0.0)
    for target, key in (target_keys or {}).items():  # rows missing or extra: the key's columns are off too
        rows = evidence.off(target)[1]
        for name in _closure(lineage, set(key)) if rows > 0 else ():
            weights[name] = weights.get(name, 0.0) + rows + (0.5 if name in key else 0.0)
    swaps: dict[str, list[tuple[str, str, int]]] = {}
    for (column, got, wanted), count in evidence.swaps.most_common():
        swaps.setdefault(column, []).append((got, wanted, count))
    for name in list(weights):  # a projection feeding a swapped column sees its swaps
        if name not in swaps:
            fed = [c for c in swaps if name in _closure(lineage, {c})]
            if fed:
                swaps[name] = swaps[fed[0]]
    ratios = {c: statistics.median(v) for c, v in evidence.ratios.items() if v}
    seen = sum(evidence.rows.values()) or 1
    rows_off = (sum(evidence.missing.values()) + sum(evidence.extra.values())) / seen
    return Scope(weights, swaps, ratios, min(rows_off, 1.0), tuple(keys), models, downstream or {})


def _downstream(project: DbtProject, models: Sequence[str]) -> dict[str, float]:
    """Model -> the share of the other `models` that read it, directly or through other models."""
    readers = {m: upstream_models(project, [m]) - {m} for m in models}
    others = max(len(models) - 1, 1)
    return {m: sum(m in read for read in readers.values()) / others for m in models}


def _lineage(files: dict[str, EditableFile], rendered: Sequence[exp.Expression] = ()) -> dict[str, set[str]]:
    """Each projection's output name -> the column names its expression reads (by name, across models), in the
    files as written and in their rendered queries (a column a Jinja loop makes is known by its rendered name)."""
    lineage: dict[str, set[str]] = {}
    trees = [file.sql.tree for file in files.values() if file.sql is not None] + list(rendered)
    for tree in trees:
        for alias, node in projections(tree):
            lineage.setdefault(alias, set()).update(c.name for c in node.find_all(exp.Column))
    return lineage


def _closure(lineage: dict[str, set[str]], columns: set[str]) -> set[str]:
    """The column names that feed `columns`, through every model's projections (by name)."""
    closure = set(columns)
    while True:
        grown = closure | {r for name in closure for r in lineage.get(name, ())}
        if grown == closure:
            return closure
        closure = grown


def hypotheses(
    project: DbtProject,
    checked: ValidatedProject | None,
    evidence: Evidence,
    dialect: str,
    *,
    targets: Sequence[str] | None = None,
    keys: Sequence[str] = (),
    target_keys: Mapping[str, Sequence[str]] | None = None,
) -> list[Edit]:
    """Every edit the evidence suggests, heaviest first. Edits are of the project as written; `checked` (the
    project as validated, when at hand) adds its rendered queries to the lineage."""
    files = editable_files(project, targets, dialect)
    rendered = [m.tree for m in checked.models.values() if m.tree is not None] if checked is not None else []
    scope = scope_of(
        files,
        evidence,
        keys,
        implicated(project, evidence, targets),
        target_keys,
        rendered,
        _downstream(project, [f.name for f in files.values() if f.sql is not None]),
    )
    scale = evidence.scale()
    if scale is not None:  # the unit factor applies to the projections that feed its columns
        scale = (scale[0], _closure(_lineage(files, rendered), scale[1]))
    known = relation_columns(editable_files(project, None, dialect).values())
    repairs: list[Repair] = []
    called: dict[str, float] = {}
    for file in files.values():
        if file.sql is None or not scope.implicated(file.name):
            continue
        repairs += expression_repairs(file, scope)
        repairs += row_repairs(file, scope, scale, set(evidence.nulls), known)
        for alias, node in projections(file.sql.tree):
            text = file.sql.source(node) or ""
            for holder, jinja in file.holders.items():
                if holder in text:
                    for name in macro_calls(jinja):
                        called[name] = max(called.get(name, 0.0), scope.of(alias))
    factor = scale[0] if scale is not None else None
    for file in files.values():
        if file.macros:
            repairs += macro_repairs(file, called, factor)
    repairs += label_edits(files, evidence)
    edits = [e for e in (_edit(project, files, r, dialect) for r in repairs) if e is not None]
    unique = {e.code: e for e in sorted(edits, key=lambda e: e.weight)}  # the heaviest of equal edits
    return sorted(unique.values(), key=lambda e: -e.weight)


def _edit(project: DbtProject, files: dict[str, EditableFile], repair: Repair, dialect: str) -> Edit | None:
    """The project with `repair` applied to its file as written; None when the edited model no longer parses."""
    file = files[repair.path]
    try:
        masked = apply(file.masked, repair.changes)
        text = apply(file.text, [type(c)(c.start, c.end, file.unmask(c.text)) for c in repair.changes])
    except ValueError:
        return None
    if file.sql is not None and SpannedSql.parse(masked, dialect) is None:
        return None
    if text == file.text:
        return None
    return Edit(repair.approach, project.replace({repair.path: text}).to_text(), repair.weight)
