"""What a training outcome says about a dbt program's rows (`Evidence`): which columns mismatch and how, which
models miss rows or return extra ones. The repair mutator, its AI-label edit and the coding agent's draft view
all read it; it imports nothing of the kind, so none of them closes an import circle through another."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass
class Evidence:
    """What a training outcome says about a program's rows."""

    columns: Counter[str] = field(default_factory=Counter)  # column -> rows where it mismatches
    ratios: dict[str, list[float]] = field(default_factory=dict)  # column -> output / expected
    swaps: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (column, got, wanted)
    nulls: Counter[str] = field(default_factory=Counter)  # column -> got NULL where a value was expected
    missing: Counter[str] = field(default_factory=Counter)  # model -> rows with no output
    extra: Counter[str] = field(default_factory=Counter)  # model -> rows returned that no expected row has
    rows: Counter[str] = field(default_factory=Counter)  # model -> expected rows seen
    wrong_rows: Counter[str] = field(default_factory=Counter)  # model -> rows with a column that mismatches
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
            evidence.rows[model] += 1
            if not isinstance(found, dict):
                evidence.missing[model] += 1
                continue
            differs = False
            for column, value in wanted.items():
                actual = found.get(column)
                if actual == value or (_number(actual) and _number(value) and abs(actual - value) < 0.005):
                    continue
                differs = True
                evidence.columns[column] += 1
                if actual is None:
                    evidence.nulls[column] += 1
                elif _number(actual) and _number(value) and value:
                    evidence.ratios.setdefault(column, []).append(actual / value)
                elif isinstance(actual, str) and isinstance(value, str):
                    evidence.swaps[(column, actual, value)] += 1
            evidence.wrong_rows[model] += differs
        return evidence

    def off(self, model: str) -> tuple[float, float]:
        """(share of target `model`'s rows that are wrong, missing or extra; share missing or extra)."""
        total = self.rows[model] + self.extra[model]
        if not total:
            return 0.0, 0.0
        rows = self.missing[model] + self.extra[model]
        return (rows + self.wrong_rows[model]) / total, rows / total

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
