"""Local-testing Snowpark sessions for the tests: coco-sql's procedures registered with `session.sproc.register`
(the real handlers, by `engines.snowflake.procs.local_deploy`), run under the strict emulation of a stored procedure's limits (`engines.snowflake.strict`).
Imported only by tests that have skipped themselves when Snowpark is not installed."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pandas as pd
from snowflake.snowpark import Session

from coco_sql.engines.snowflake.procs.local_deploy import deploy_local
from coco_sql.engines.snowflake.strict import StrictLimits, strict_procedures


def procedure_session(tables: dict[str, pd.DataFrame] | None = None) -> Session:
    """A fresh local-testing session holding `tables` (column names upper-cased, as Snowflake folds them) and
    coco-sql's procedures."""
    session = Session.builder.config("local_testing", True).create()
    for name, frame in (tables or {}).items():
        upper = frame.copy()
        upper.columns = [str(c).upper() for c in upper.columns]
        session.create_dataframe(upper).write.save_as_table(name)
    deploy_local(session)  # the tables (created once, as `coco-sql deploy` does) and the procedures
    return session


@contextlib.contextmanager
def strict_session(tables: dict[str, pd.DataFrame] | None = None) -> Iterator[tuple[Session, StrictLimits]]:
    """`procedure_session` whose procedures run under Snowflake's documented limits: no process, no socket,
    writes under /tmp only, the session from the calling thread only. Every refusal is counted, caught or not,
    and none may happen (checked when the block ends, after the session is closed)."""
    session = procedure_session(tables)
    with strict_procedures(session) as limits:
        yield session, limits
    session.close()
    limits.check()


def usage_totals(frame: pd.DataFrame) -> dict[tuple[str, str, str], tuple[int, int, int]]:
    """ai_usage rows as {(split, function, model): (calls, input tokens, output tokens)}, cached tokens
    included (a warehouse has no cache of coco-sql's: what the DuckDB path answers from its cache, Cortex bills)."""
    totals: dict[tuple[str, str, str], list[int]] = {}
    for row in frame.itertuples(index=False):
        line = totals.setdefault((row.split, row.function, row.model), [0, 0, 0])
        line[0] += int(row.calls)
        line[1] += int(row.input_tokens) + int(row.cached_input_tokens)
        line[2] += int(row.output_tokens) + int(row.cached_output_tokens)
    return {key: (calls, tokens_in, tokens_out) for key, (calls, tokens_in, tokens_out) in totals.items()}


def plain(value: Any) -> Any:
    """A cell as a comparable Python value (numpy scalars unwrapped, pandas' NaN as None)."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value
