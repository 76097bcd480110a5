"""What people get wrong in a pipeline's expressions, as token edits: CASE mappings and WHEN conditions, date
grains, format strings, comparison operators, window functions, aggregates, and literals in macros.

Each repair reads the evidence of the training rows (`evidence.Evidence`: which columns mismatch, swapped values,
ratios) and the model's tree, and returns `Repair`s: a file, its `Change`s (token spans of the original text,
so an accepted edit changes only the tokens it changes) and a weight. A repair is proposed only where the
edited expression feeds a mismatching column (`Scope`), heavier the more mismatches point at it. Row-level
repairs (joins, filters, grain) are in `repairs_rows`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.tokens import TokenType

from coco_sql.languages.dbt.sql_files import EditableFile
from coco_sql.sqlkit.spans import Change, SpannedSql

UNITS = ("day", "week", "month", "quarter", "year")
PARTS = ("dow", "isodow", "day", "week", "month", "quarter", "year", "doy", "hour")
FORMATS = ("%Y-%m-%d", "%Y-%m", "%Y%m", "%Y/%m/%d", "%d/%m/%Y", "%m/%d/%Y", "%Y-%m-%d %H:%M:%S", "%b %Y",
           "%B %Y", "%Y", "%d-%m-%Y", "%Y-W%W", "%Y-%j")  # fmt: skip
_FLIP = {exp.GT: ">=", exp.GTE: ">", exp.LT: "<=", exp.LTE: "<", exp.EQ: "!=", exp.NEQ: "="}
_WINDOW_SWAP = {"lag": "lead", "lead": "lag", "row_number": "rank", "rank": "dense_rank", "dense_rank": "row_number",
                "first_value": "last_value", "last_value": "first_value", "min": "max", "max": "min"}  # fmt: skip
_OPERATORS = {exp.Add: ("-", "*"), exp.Sub: ("+",), exp.Mul: ("+", "/"), exp.Div: ("*",)}
_AGG_SWAP = {
    "sum": ("avg", "max"),
    "avg": ("sum",),
    "min": ("max",),
    "max": ("min", "sum"),
    "count": ("sum",),
}


@dataclass(frozen=True)
class Repair:
    path: str
    changes: tuple[Change, ...]
    approach: str
    weight: float


@dataclass(frozen=True)
class Scope:
    """Which output columns the evidence points at: `weights` (column -> share of the mismatches it feeds),
    swapped values per column, the numeric ratio shared by a column's mismatches, and the rows off (missing or
    extra rows per expected row)."""

    weights: dict[str, float]
    swaps: dict[str, list[tuple[str, str, int]]]
    ratios: dict[str, float]
    rows_off: float
    keys: tuple[str, ...]
    models: dict[str, tuple[float, float]] | None = (
        None  # model -> how off the targets it feeds are (any, rows)
    )
    # model -> the share of the other edited models that read it (directly or not): a unit is fixed where it enters
    downstream: Mapping[str, float] = field(default_factory=dict)

    def of(self, alias: str | None) -> float:
        return self.weights.get(alias or "", 0.0)

    def implicated(self, model: str) -> bool:
        """True when a target the model feeds has a row wrong, missing or extra (all, without model data)."""
        return self.models is None or self.models.get(model, (0.0, 0.0))[0] > 0

    def rows_of(self, model: str) -> float:
        """The share of rows missing or extra in the targets the model feeds."""
        return self.rows_off if self.models is None else self.models.get(model, (0.0, 0.0))[1]


def projections(tree: exp.Expression) -> Iterator[tuple[str, exp.Expression]]:
    """(output name, expression) of every projection of every SELECT in `tree`."""
    for select in tree.find_all(exp.Select):
        for item in select.expressions:
            if isinstance(item, exp.Alias):
                yield item.alias, item.this
            elif isinstance(item, exp.Column):
                yield item.name, item


def _quoted(token_text: str, value: str) -> str:
    """`value` as a string literal quoted like `token_text` was."""
    quote = token_text[0] if token_text[:1] in ("'", '"') else "'"
    return quote + value.replace(quote, quote * 2) + quote


def _cased(original: str, word: str) -> str:
    return word.upper() if original.isupper() else word


def expression_repairs(file: EditableFile, scope: Scope) -> list[Repair]:
    """Every expression-level repair of one model that parses (see the module docstring)."""
    sql = file.sql
    if sql is None:
        return []
    found: list[Repair] = []
    rows = scope.rows_of(file.name)
    for alias, node in projections(sql.tree):
        relevance = scope.of(alias)
        if relevance <= 0:
            if rows > 0:  # a grain that feeds a join or a GROUP BY: rows missing or extra point at it too
                found += _units(file, sql, node, f"{file.name}.{alias}", 0.5 * rows)
            continue
        label = f"{file.name}.{alias}"
        for case in node.find_all(exp.Case):
            found += _case(file, sql, case, label, relevance, scope.swaps.get(alias, []))
        found += _units(file, sql, node, label, relevance)
        found += _formats(file, sql, node, label, relevance, scope.swaps.get(alias, []))
        found += _windows(file, sql, node, label, relevance, scope.keys)
        found += _aggregates(file, sql, node, label, relevance)
        found += _arithmetic(file, sql, node, label, relevance, scope.ratios.get(alias))
    return [r for r in found if all(file.clean(c) for c in r.changes)]


def _case(file: EditableFile, sql: SpannedSql, case: exp.Case, label: str, relevance: float,
          swaps: list[tuple[str, str, int]]) -> list[Repair]:  # fmt: skip
    """CASE mappings: a THEN value the rows show swapped, a WHEN operator, two WHENs' order or their literals."""
    found: list[Repair] = []
    ifs = list(case.args.get("ifs") or [])
    results = [i.args.get("true") for i in ifs] + [case.args.get("default")]
    out_of: dict[str, int] = {}
    for got, _, count in swaps:
        out_of[got] = out_of.get(got, 0) + count
    for got, wanted, count in swaps:
        consistent = count / out_of[got]  # the share of the rows that got `got` and wanted this same value
        for result in results:
            if isinstance(result, exp.Literal) and result.is_string and result.this == got:
                change = sql.replace_node(result, _quoted(sql.source(result) or "'", wanted))
                if change is not None:
                    found.append(Repair(file.path, (change,), f"map {got!r} to {wanted!r} in {label}'s CASE",
                                        1.5 + 3.0 * consistent + relevance))  # fmt: skip
    for k, branch in enumerate(ifs):
        for compare in branch.this.find_all(*_FLIP):
            between = sql.between(compare.this, compare.expression)
            if len(between) == 1:
                new = _FLIP[type(compare)]
                cond = (sql.source(branch.this) or "")[:50]
                found.append(Repair(file.path, (sql.replace_token(between[0][0], new),),
                                    f"WHEN #{k + 1} of {label}: {new} instead of {between[0][1].text} in {cond}",
                                    2.2 + relevance))  # fmt: skip
            for literal in compare.find_all(exp.Literal):
                found += _nudged(file, sql, literal, f"WHEN #{k + 1} of {label}", 1.4 + relevance)
    for k in range(len(ifs) - 1):
        a, b = sql.span(ifs[k]), sql.span(ifs[k + 1])
        if a is None or b is None:
            continue
        text_a, text_b = sql.text[a[0] : a[1]], sql.text[b[0] : b[1]]
        found.append(Repair(file.path, (Change(a[0], a[1], text_b), Change(b[0], b[1], text_a)),
                            f"WHEN #{k + 1} and #{k + 2} of {label} in the other order", 1.6 + relevance))  # fmt: skip
    strings = [(k, lit) for k, i in enumerate(ifs) for lit in i.this.find_all(exp.Literal) if lit.is_string]
    for x in range(len(strings)):
        for y in range(x + 1, min(len(strings), x + 4)):
            (kx, lx), (ky, ly) = strings[x], strings[y]
            sx, sy = sql.source(lx), sql.source(ly)
            if kx != ky and sx and sy and sx != sy:
                change_x, change_y = sql.replace_node(lx, sy), sql.replace_node(ly, sx)
                if change_x is not None and change_y is not None:
                    found.append(Repair(file.path, (change_x, change_y),
                                        f"swap {sx} and {sy} in the WHENs of {label}", 1.9 + relevance))  # fmt: skip
    default = case.args.get("default")
    source = sql.source(default) if default is not None else None
    change = sql.replace_node(case, source) if source else None
    if change is not None:
        found.append(Repair(file.path, (change,), f"pass {label} through instead of its CASE mapping",
                            2.0 + relevance + (1.0 if swaps else 0.0)))  # fmt: skip
    return found


def _nudged(
    file: EditableFile, sql: SpannedSql, literal: exp.Literal, where: str, weight: float
) -> list[Repair]:
    """A numeric literal off by one, or by a factor of ten."""
    if literal.is_string:
        return []
    try:
        value = float(literal.this)
    except ValueError:
        return []
    text = literal.this
    integral = value == int(value) and "." not in text
    options = [value + 1, value - 1, value * 10, value / 10] if integral else [value * 10, value / 10]
    found = []
    for option in options:
        new = str(int(option)) if integral and option == int(option) else f"{option:g}"
        change = sql.replace_node(literal, new)
        if change is not None and new != text:
            found.append(Repair(file.path, (change,), f"{where}: {new} instead of {text}", weight))
    return found


def _units(
    file: EditableFile, sql: SpannedSql, node: exp.Expression, label: str, relevance: float
) -> list[Repair]:
    """A date grain or part: the unit word of date_trunc / date_part / extract / date_diff / interval."""
    span = sql.span(node)
    if span is None:
        return []
    found = []
    for index, token in sql.tokens_in(*span):
        word = token.text.strip("'\"").lower()
        is_string = token.token_type == TokenType.STRING
        if word not in PARTS or not (is_string or (index > 0 and sql.tokens[index - 1].token_type in
                                     (TokenType.NUMBER, TokenType.L_PAREN, TokenType.STRING))):  # fmt: skip
            continue
        for other in UNITS if word in UNITS else PARTS:
            if other == word:
                continue
            new = _quoted(token.text, other) if is_string else _cased(token.text, other)
            found.append(Repair(file.path, (sql.replace_token(index, new),),
                                f"{label}: grain {other} instead of {word}", 2.0 + relevance))  # fmt: skip
    return found


def _formats(file: EditableFile, sql: SpannedSql, node: exp.Expression, label: str, relevance: float,
             swaps: list[tuple[str, str, int]]) -> list[Repair]:  # fmt: skip
    """A format string (strftime, to_char...): the formats that turn the values the rows got into those they
    expected, read from the swaps; without swaps, a few common ones."""
    span = sql.span(node)
    found = []
    for index, token in sql.tokens_in(*span) if span else ():
        current = token.text[1:-1]
        if token.token_type != TokenType.STRING or "%" not in current:
            continue
        derived = _derived_formats(current, swaps)
        options = derived or [f for f in FORMATS if f != current][:6]
        for option in options:
            found.append(Repair(file.path, (sql.replace_token(index, _quoted(token.text, option)),),
                                f"{label}: format {option!r} instead of {current!r}",
                                (3.5 if derived else 1.2) + relevance))  # fmt: skip
    return found


def _derived_formats(current: str, swaps: list[tuple[str, str, int]]) -> list[str]:
    """Formats f such that every swapped value, read back with `current`, formats with f to what was expected."""
    found = []
    for option in FORMATS:
        if option == current:
            continue
        agree = 0
        for got, wanted, _ in swaps[:20]:
            try:
                stamp = dt.datetime.strptime(got, current)
            except ValueError:
                break
            if stamp.strftime(option) != wanted:
                break
            agree += 1
        if agree and agree == min(len(swaps), 20):
            found.append(option)
    return found


def _windows(file: EditableFile, sql: SpannedSql, node: exp.Expression, label: str, relevance: float,
             keys: tuple[str, ...]) -> list[Repair]:  # fmt: skip
    """A window's function, partition or order: lag/lead, the ranking functions, a partition column dropped or the
    key added, the order direction flipped."""
    found: list[Repair] = []
    for window in node.find_all(exp.Window):
        function = window.this
        head = sql.token_range(function) if function is not None else None
        if head is not None:
            name = sql.tokens[head[0]].text
            swapped = _WINDOW_SWAP.get(name.lower())
            if swapped:
                found.append(Repair(file.path, (sql.replace_token(head[0], _cased(name, swapped)),),
                                    f"{label}: {swapped} instead of {name}", 1.8 + relevance))  # fmt: skip
        partition = list(window.args.get("partition_by") or [])
        spans = [sql.span(c) for c in partition]
        if any(s is None for s in spans):
            partition, spans = [], []
        for k, column in enumerate(partition if len(partition) > 1 else []):
            start = spans[k][0] if k == 0 else spans[k - 1][1]  # type: ignore[index]
            end = spans[k + 1][0] if k == 0 else spans[k][1]  # type: ignore[index]
            found.append(Repair(file.path, (Change(start, end, ""),),
                                f"{label}: partition without {sql.source(column)}", 1.6 + relevance))  # fmt: skip
        names = {c.name for c in partition if isinstance(c, exp.Column)}
        if spans:
            for key in keys:
                if key not in names:
                    end = spans[-1][1]  # type: ignore[index]
                    found.append(Repair(file.path, (Change(end, end, f", {key}"),),
                                        f"{label}: partition by {key} too", 1.5 + relevance))  # fmt: skip
        order = window.args.get("order")
        for ordered in order.expressions if order is not None else ():
            span = sql.span(ordered)
            if span is None:
                continue
            text = sql.text[span[0] : span[1]]
            lowered = text.rstrip().lower()
            new = text[: -len(" desc")] if lowered.endswith(" desc") else text + " desc"
            found.append(Repair(file.path, (Change(span[0], span[1], new),),
                                f"{label}: window order {new.strip()} instead of {text.strip()}", 1.7 + relevance))  # fmt: skip
    return found


def _aggregates(
    file: EditableFile, sql: SpannedSql, node: exp.Expression, label: str, relevance: float
) -> list[Repair]:
    """An aggregate function swapped for a kin one (sum / avg / max, min / max), or a count made distinct."""
    found = []
    for agg in node.find_all(exp.AggFunc):
        found_range = sql.token_range(agg)
        if found_range is None or isinstance(agg.parent, exp.Window):
            continue
        name_token = sql.tokens[found_range[0]]
        name = name_token.text
        for other in _AGG_SWAP.get(name.lower(), ()):
            found.append(Repair(file.path, (sql.replace_token(found_range[0], _cased(name, other)),),
                                f"{label}: {other} instead of {name}", 1.2 + relevance))  # fmt: skip
        if isinstance(agg, exp.Count) and not isinstance(agg.this, (exp.Distinct, exp.Star)):
            paren = sql.tokens[found_range[0] + 1]
            if paren.token_type == TokenType.L_PAREN:
                found.append(Repair(file.path, (Change(paren.end + 1, paren.end + 1, "distinct "),),
                                    f"count distinct in {label} (grain)", 1.5 + relevance))  # fmt: skip
    return found


def _arithmetic(file: EditableFile, sql: SpannedSql, node: exp.Expression, label: str, relevance: float,
                ratio: float | None) -> list[Repair]:  # fmt: skip
    """An arithmetic operator exchanged for a kin one (+ - * /), operands of a subtraction swapped (the rows show
    the negated value)."""
    found = []
    for sub in node.find_all(exp.Sub, exp.Add, exp.Mul, exp.Div):
        between = sql.between(sub.this, sub.expression)
        a, b = sql.span(sub.this), sql.span(sub.expression)
        if len(between) != 1 or a is None or b is None:
            continue
        for other in _OPERATORS[type(sub)]:
            found.append(Repair(file.path, (sql.replace_token(between[0][0], other),),
                                f"{label}: {other} instead of {between[0][1].text}", 1.3 + relevance))  # fmt: skip
        if isinstance(sub, exp.Sub):
            left, right = sql.text[a[0] : a[1]], sql.text[b[0] : b[1]]
            weight = (3.5 if ratio is not None and abs(ratio + 1) < 0.05 else 1.1) + relevance
            found.append(Repair(file.path, (Change(a[0], a[1], right), Change(b[0], b[1], left)),
                                f"{label}: {right} - {left} instead of {left} - {right}", weight))  # fmt: skip
    return found


def macro_repairs(file: EditableFile, called: dict[str, float], factor: float | None) -> list[Repair]:
    """Token edits inside the macros that relevant projections call (`called`: macro name -> relevance): a number
    scaled by the unit factor the rows show (or by ten), a grain or date part, a comparison operator."""
    found: list[Repair] = []
    for name, offset, tokens in file.fragments():
        relevance = called.get(name, 0.0)
        if relevance <= 0:
            continue
        label = f"macro {name}"
        for k, token in enumerate(tokens):
            start, end = offset + token.start, offset + token.end + 1
            if token.token_type == TokenType.NUMBER:
                found += _scaled_number(file.path, token.text, start, end, label, relevance, factor,
                                        tokens[k - 1].text if k else "")  # fmt: skip
            word = token.text.strip("'\"").lower()
            if word in PARTS and token.token_type in (TokenType.STRING, TokenType.VAR):
                for other in UNITS if word in UNITS else PARTS:
                    if other != word:
                        new = _quoted(token.text, other) if token.token_type == TokenType.STRING else other
                        found.append(Repair(file.path, (Change(start, end, new),),
                                            f"{label}: {other} instead of {word}", 1.8 + relevance))  # fmt: skip
            flipped = {">": ">=", ">=": ">", "<": "<=", "<=": "<"}.get(token.text)
            if flipped:
                found.append(Repair(file.path, (Change(start, end, flipped),),
                                    f"{label}: {flipped} instead of {token.text} (token {k})", 1.3 + relevance))  # fmt: skip
    return [r for r in found if all(file.clean(c) for c in r.changes)]


def _scaled_number(path: str, text: str, start: int, end: int, label: str, relevance: float,
                   factor: float | None, before: str) -> list[Repair]:  # fmt: skip
    try:
        value = float(text)
    except ValueError:
        return []
    options: list[tuple[float, float]] = [(value * 10, 1.2), (value / 10, 1.2)]
    if factor:  # the output is `factor` times too large: a divisor grows, a multiplier shrinks
        options.insert(0, (value * factor if before == "/" else value / factor, 3.0))
    found = []
    for option, weight in options:
        new = str(int(option)) if option == int(option) else f"{option:g}"
        if new != text:
            found.append(
                Repair(
                    path, (Change(start, end, new),), f"{label}: {new} instead of {text}", weight + relevance
                )
            )
    return found
