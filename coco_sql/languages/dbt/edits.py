"""Model edits for the dbt repair mutator: what mismatching rows suggest, as concrete project changes.

`Evidence` reads a program's training outcome (each row instance's output and expected JSON): which columns
mismatch, by what ratio, which category values are swapped, which rows are missing or null. `hypotheses` turns
it into edits of the project's models (sqlglot over each model with its Jinja expressions held as
placeholders): unit scaling, a CASE mapping passed through, inner joins made left joins, COUNT made
COUNT(DISTINCT), COALESCE, a WHERE conjunct dropped, SELECT DISTINCT, an AI_CLASSIFY's missing labels
(`ai_labels`). Edits touch only the projections that feed a mismatching column (a lineage by name across
models), ranked by how much evidence points at them.
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp

from coco_sql.languages.dbt.ai_labels import label_edits
from coco_sql.languages.dbt.project import DbtProject

_JINJA = re.compile(r"\{\{.*?\}\}", re.S)
_COMMENT = re.compile(r"\{#.*?#\}", re.S)
_HOLDER = "__coco_jinja_{}"


@dataclass
class Evidence:
    """What a training outcome says about a program's rows."""

    columns: Counter[str] = field(default_factory=Counter)  # column -> rows where it mismatches
    ratios: dict[str, list[float]] = field(default_factory=dict)  # column -> output / expected
    swaps: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (column, got, wanted)
    nulls: Counter[str] = field(default_factory=Counter)  # column -> got NULL where a value was expected
    missing: Counter[str] = field(default_factory=Counter)  # model -> rows with no output
    extra: Counter[str] = field(default_factory=Counter)  # model -> rows returned that no expected row has
    errors: int = 0

    @classmethod
    def of(
        cls, ids: Sequence[str], outputs: Sequence[str | None], expected: Sequence[str | None]
    ) -> Evidence:
        evidence = cls()
        for instance, got, want in zip(ids, outputs, expected, strict=True):
            model = str(instance).split(":", 1)[0]
            wanted, found = decode_row(want), decode_row(got)
            if not isinstance(wanted, dict):
                continue
            if str(instance).endswith("#extra"):  # the target's extra-rows instance (`task.EXTRA`)
                count = found.get("__extra_rows__") if isinstance(found, dict) else None
                if isinstance(count, int) and count > 0:
                    evidence.extra[str(instance).removesuffix("#extra")] += count
                continue
            if not isinstance(found, dict):
                evidence.missing[model] += 1
                continue
            for column, value in wanted.items():
                actual = found.get(column)
                if actual == value or (_number(actual) and _number(value) and abs(actual - value) < 0.005):
                    continue
                evidence.columns[column] += 1
                if actual is None:
                    evidence.nulls[column] += 1
                elif _number(actual) and _number(value) and value:
                    evidence.ratios.setdefault(column, []).append(actual / value)
                elif isinstance(actual, str) and isinstance(value, str):
                    evidence.swaps[(column, actual, value)] += 1
        return evidence

    def scale(self) -> tuple[float, set[str]] | None:
        """The unit factor most numeric mismatches share (100 for cents reported as units) and the columns
        whose mismatches it explains, if one dominates."""
        ratios = [r for values in self.ratios.values() for r in values if r > 0]
        if len(ratios) < 3:
            return None
        factor = statistics.median(ratios)
        for unit in (1000.0, 100.0, 10.0, 0.1, 0.01, 0.001):
            if abs(factor / unit - 1) < 0.05:
                columns = {c for c, v in self.ratios.items() if abs(statistics.median(v) / unit - 1) < 0.05}
                return unit, columns
        return None


def decode_row(text: str | None) -> object:
    """A stored output or expected value: the row as a dict (stored outputs are JSON texts of the JSON row), a
    data test's status as text, None for no output or text that is not JSON."""
    value: object = text
    for depth in range(2):
        if not isinstance(value, str):
            break
        try:
            value = json.loads(value)
        except ValueError:
            return value if depth else None
    return value


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


@dataclass(frozen=True)
class Edit:
    approach: str
    code: str
    weight: float


class Model:
    """One model's SQL as a sqlglot tree, its Jinja expressions held as placeholders (`text` writes it back)."""

    def __init__(self, path: str, source: str, dialect: str) -> None:
        self.path, self.dialect = path, dialect
        body = _COMMENT.sub("", source)
        lines = body.splitlines()
        head = [line for line in lines if line.strip().startswith("{{") and "config(" in line]
        body = "\n".join(line for line in lines if line not in head)
        self.head = "".join(line + "\n" for line in head)
        self.holders: dict[str, str] = {}

        def hold(match: re.Match[str]) -> str:
            name = _HOLDER.format(len(self.holders))
            self.holders[name] = match.group(0)
            return name

        self.tree = sqlglot.parse_one(_JINJA.sub(hold, body), read=dialect)

    def text(self, tree: exp.Expression) -> str:
        sql = tree.sql(dialect=self.dialect, pretty=True)
        for name, jinja in self.holders.items():
            sql = sql.replace(name, jinja)
        return self.head + sql + "\n"

    def lineage(self) -> dict[str, set[str]]:
        """Each projection's output name -> the column names its expression reads."""
        found: dict[str, set[str]] = {}
        for alias in self.tree.find_all(exp.Alias):
            found.setdefault(alias.alias, set()).update(c.name for c in alias.this.find_all(exp.Column))
        return found


def models_of(project: DbtProject, run_form: DbtProject | None, dialect: str) -> dict[str, Model]:
    """The project's models that parse; one with Jinja blocks is taken from the run form (flattened)."""
    models: dict[str, Model] = {}
    for path in project.models().values():
        source = project.files[path]
        if "{%" in source:
            if run_form is None or path not in run_form.files or dialect != "duckdb":
                continue
            source = run_form.files[path]
        try:
            models[path] = Model(path, source, dialect)
        except sqlglot.errors.SqlglotError:
            continue
    return models


def _closure(models: dict[str, Model], columns: set[str]) -> set[str]:
    """The column names that feed `columns`, through every model's projections (by name)."""
    lineage: dict[str, set[str]] = {}
    for model in models.values():
        for name, reads in model.lineage().items():
            lineage.setdefault(name, set()).update(reads)
    closure = set(columns)
    while True:
        grown = closure | {r for name in closure for r in lineage.get(name, ())}
        if grown == closure:
            return closure
        closure = grown


def _edited(project: DbtProject, model: Model, tree: exp.Expression) -> str:
    return project.replace({model.path: model.text(tree)}).to_text()


def _sites(model: Model, names: set[str]) -> Iterator[tuple[int, exp.Expression]]:
    """(index, projection) of each projection in `model` whose output name is in `names`."""
    projections = [p for p in model.tree.find_all(exp.Alias, exp.Column) if isinstance(p.parent, exp.Select)]
    for index, projection in enumerate(projections):
        if projection.alias_or_name in names:
            yield index, projection


def _nth(tree: exp.Expression, index: int) -> exp.Expression:
    return [p for p in tree.find_all(exp.Alias, exp.Column) if isinstance(p.parent, exp.Select)][index]


def hypotheses(
    project: DbtProject, run_form: DbtProject | None, evidence: Evidence, dialect: str
) -> list[Edit]:
    """Every edit the evidence suggests, heaviest first."""
    models = models_of(project, run_form, dialect)
    wrong = set(evidence.columns)
    feeding = _closure(models, wrong)
    edits: list[Edit] = []
    scale = evidence.scale()
    factor, unit_columns = scale if scale is not None else (None, set())
    scaled_feed = _feeds(models, unit_columns)
    swapped = {column for column, _, _ in evidence.swaps}
    for model in models.values():
        name = model.path.rsplit("/", 1)[-1].removesuffix(".sql")
        for index, site in _sites(model, feeding):
            label = f"{name}.{site.alias_or_name}"
            inner = site.this if isinstance(site, exp.Alias) else site
            simple = (
                not isinstance(inner, (exp.Star, exp.Case, exp.Count)) and site.alias_or_name in scaled_feed
            )
            if factor is not None and simple:
                tree = model.tree.copy()
                node = _nth(tree, index)
                target = node.this if isinstance(node, exp.Alias) else node
                scaled = exp.Div(this=exp.Paren(this=target.copy()), expression=exp.Literal.number(factor))
                if factor < 1:
                    scaled = exp.Mul(
                        this=exp.Paren(this=target.copy()), expression=exp.Literal.number(1 / factor)
                    )
                target.replace(scaled if isinstance(node, exp.Alias) else exp.alias_(scaled, node.name))
                weight = 3.0 + len(scaled_feed[site.alias_or_name]) / max(len(unit_columns), 1)
                edits.append(
                    Edit(f"scale {label} by 1/{factor:g} (unit)", _edited(project, model, tree), weight)
                )
            if isinstance(inner, exp.Case) and inner.args.get("default") is not None:
                tree = model.tree.copy()
                case = _nth(tree, index).this
                case.replace(case.args["default"].copy())
                weight = 2.0 + (1.0 if feeding & swapped else 0.0) + sum(evidence.swaps.values()) / 1000
                edits.append(
                    Edit(
                        f"pass {label} through instead of its CASE mapping",
                        _edited(project, model, tree),
                        weight,
                    )
                )
            for count in inner.find_all(exp.Count):
                if isinstance(count.this, (exp.Distinct, exp.Star)):
                    continue
                tree = model.tree.copy()
                copy = next(c for c in _nth(tree, index).find_all(exp.Count) if c.sql() == count.sql())
                copy.set("this", exp.Distinct(expressions=[copy.this.copy()]))
                edits.append(Edit(f"count distinct in {label} (grain)", _edited(project, model, tree), 1.5))
            if site.alias_or_name in evidence.nulls and not isinstance(inner, exp.Star):
                tree = model.tree.copy()
                node = _nth(tree, index)
                target = node.this if isinstance(node, exp.Alias) else node
                fixed = exp.Coalesce(this=target.copy(), expressions=[exp.Literal.number(0)])
                target.replace(fixed if isinstance(node, exp.Alias) else exp.alias_(fixed, node.name))
                edits.append(Edit(f"coalesce {label} to 0", _edited(project, model, tree),
                                  1.0 + evidence.nulls[site.alias_or_name] / 1000))  # fmt: skip
        missing = sum(evidence.missing.values())
        for index, join in enumerate(model.tree.find_all(exp.Join)):
            if join.side or join.kind in ("CROSS", "SEMI", "ANTI"):
                continue
            tree = model.tree.copy()
            copy = list(tree.find_all(exp.Join))[index]
            copy.set("side", "LEFT")
            copy.set("kind", None)
            edits.append(Edit(f"left join instead of inner join #{index + 1} in {name}", _edited(project, model, tree),
                              1.0 + missing / 100))  # fmt: skip
        for index, where in enumerate(model.tree.find_all(exp.Where)):
            conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
            for k in range(len(conjuncts)):
                tree = model.tree.copy()
                copy = list(tree.find_all(exp.Where))[index]
                kept = [c.copy() for j, c in enumerate(conjuncts) if j != k]
                if kept:
                    copy.set("this", exp.and_(*kept))
                else:
                    copy.pop()
                edits.append(Edit(f"drop filter {conjuncts[k].sql()[:60]} in {name}", _edited(project, model, tree),
                                  0.5 + missing / 100))  # fmt: skip
    edits += [Edit(a, _edited(project, m, tree), w) for m, tree, a, w in label_edits(models, evidence)]
    unique = {e.code: e for e in sorted(edits, key=lambda e: e.weight)}  # the heaviest of equal edits
    return sorted(unique.values(), key=lambda e: -e.weight)


def _feeds(models: dict[str, Model], columns: set[str]) -> dict[str, set[str]]:
    """Column name -> which of `columns` it feeds (itself included)."""
    feeds: dict[str, set[str]] = {}
    for column in columns:
        for name in _closure(models, {column}):
            feeds.setdefault(name, set()).add(column)
    return feeds
