"""The named, parameterised queries of the history tools (`history_sql`) and the read models (`report_sql`):
looking one up and binding its `$name` parameters, for every store."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from coco_sql.errors import StoreError

_PARAMETER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


def named_query(
    kind: str, queries: Mapping[str, str], name: str, params: Mapping[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The DuckDB text of query `name` and the parameters it mentions (extra ones in `params` are ignored);
    StoreError for an unknown name or a missing parameter."""
    sql = queries.get(name)
    if sql is None:
        raise StoreError(f"no {kind} query {name!r} (known: {', '.join(sorted(queries))})")
    wanted = list(dict.fromkeys(_PARAMETER.findall(sql)))
    missing = [key for key in wanted if key not in params]
    if missing:
        raise StoreError(f"{kind} query {name!r} needs parameter(s) {', '.join(missing)}")
    return sql, {key: params[key] for key in wanted}


def decode_lists(rows: list[dict[str, Any]], columns: Sequence[str]) -> list[dict[str, Any]]:
    """`rows` with each of `columns` (comma-separated integers, how a query returns a list in both engines:
    `store.portable`) as a list of ints; NULL or '' is the empty list."""
    if not columns:
        return rows
    for row in rows:
        for column in columns:
            text = row.get(column)
            row[column] = [int(part) for part in str(text).split(",")] if text not in (None, "") else []
    return rows
