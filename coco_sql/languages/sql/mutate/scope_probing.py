"""How the offline mutator sees the scope of a CASE on the training rows: one probe query per distinct enclosing
SELECT (cached for a whole proposal, so screening ten targets reads the rows once), the scope as seen from the
target row, and a live check of which candidate conditions fire on that row."""

from __future__ import annotations

from sqlglot import exp

from coco_sql.errors import EvaluationError
from coco_sql.languages.sql.mutate.edits import (
    Fires,
    ScopeData,
    cases,
    enclosing_select,
    frequent_values,
    scope_probe,
)
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sandbox import QueryResult


class _Probes(dict[str, QueryResult | None]):
    """One proposal's probe results by SQL, and what `_scope_data` derives from each (frequent values, rows by
    id), so that screening ten targets reads the training rows once, not ten times. Keyed by the id of a parsed
    query, which the proposal keeps alive."""

    def __init__(self) -> None:
        super().__init__()
        self.derived: dict[str, tuple[dict[str, tuple], dict[str, tuple[object, ...]]]] = {}
        self.scope_sql: dict[tuple[int, int], str | None] = {}  # (id of the parsed parent, CASE) -> probe


class ScopeProbing:
    """The scope probes of :class:`coco_sql.languages.sql.mutate.offline.OfflineMutator`, which mixes them in."""

    def _profile_scopes(
        self,
        query: exp.Expression,
        env: DraftEnvironment,
        target: str | None,
        cache: dict[str, QueryResult | None] | None = None,
    ) -> dict[int, ScopeData]:
        """Probe the training rows once per distinct SELECT that contains a CASE (once per proposal with `cache`)."""
        cache = _Probes() if cache is None else cache
        scopes: dict[int, ScopeData] = {}
        scope_sql = cache.scope_sql if isinstance(cache, _Probes) else {}
        for index, case in enumerate(cases(query)):
            if (id(query), index) not in scope_sql:  # the same for every target: rendered once
                select = enclosing_select(case)
                scope_sql[id(query), index] = scope_probe(query, select) if select is not None else None
            probe = scope_sql[id(query), index]
            if probe is None:
                continue
            if probe not in cache:
                try:
                    cache[probe] = env.probe(probe)
                except EvaluationError:
                    cache[probe] = None
            result = cache[probe]
            if result is not None:
                scopes[index] = self._scope_data(probe, result, target, cache)
        return scopes

    @staticmethod
    def _fires(env: DraftEnvironment, target: str | None) -> Fires:
        """Evaluate candidate conditions on the target row with one live query per scope."""

        def fires(scope: ScopeData, conditions: list[exp.Expression]) -> list[bool]:
            if target is None or not conditions:
                return [False] * len(conditions)
            checks = ", ".join(
                f"COALESCE(({condition.sql(dialect=SANDBOX_DIALECT)}), FALSE) AS h{i}"
                for i, condition in enumerate(conditions)
            )
            sql = f"SELECT {checks} FROM ({scope.probe}) AS scope WHERE scope.id = {exp.Literal.string(target).sql()}"
            try:
                rows = env.probe(sql).rows
            except EvaluationError:
                return [False] * len(conditions)
            return [bool(v) for v in rows[0]] if rows else [False] * len(conditions)

        return fires

    @staticmethod
    def _scope_data(
        sql: str, result: QueryResult, target: str | None, cache: dict[str, QueryResult | None]
    ) -> ScopeData:
        """The scope as seen from `target`; what does not depend on the target is derived once per probe."""
        columns = result.columns
        derived = cache.derived if isinstance(cache, _Probes) else {}
        if sql not in derived:
            at = columns.index("id") if "id" in columns else None
            first: dict[str, tuple[object, ...]] = {}
            for row in result.rows if at is not None else ():
                first.setdefault(str(row[at]), row)
            derived[sql] = (frequent_values(result.rows, columns), first)
        frequent, by_id = derived[sql]
        row = by_id.get(target) if target is not None else None
        target_row = dict(zip(columns, row, strict=True)) if row is not None else None
        return ScopeData(columns=columns, target_row=target_row, frequent=frequent, probe=sql)
