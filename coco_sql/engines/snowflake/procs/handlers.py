"""The Snowpark handlers of coco-sql's stored procedures: the same names and arguments as in DuckDB.

Each handler opens a `SnowparkStore` on the caller's session and calls the engine-neutral handler of
`coco_sql.procedures.handlers`; its rows come back as the procedure's table. `PROCEDURES` describes each one for
`CREATE PROCEDURE` (`engines.snowflake.procs.deploy`) and for `session.sproc.register` (tests, local testing); it lives in
`signatures`, which does not import Snowpark:

    CALL coco_task('reviews', 'reviews', {'label': 'label', 'seed_program': 'SELECT id, ... FROM input'});
    CALL coco_evolve('reviews', 30, {'seed': 1});
    CALL coco_status();
    CALL coco_help('coco_task');
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Optional

from snowflake.snowpark import DataFrame, Session
from snowflake.snowpark.types import Variant

from coco_sql.engines.snowflake.procs.signatures import PROCEDURES
from coco_sql.llm.routing import CORTEX_ENDPOINT, AiConfig
from coco_sql.procedures import handlers as neutral
from coco_sql.procedures.help import coco_help as help_rows


# Snowpark evaluates these type hints when it registers a handler, so they are spelled the way it reads them
# (typing.Optional, snowpark's Variant) and the imports above are not behind TYPE_CHECKING.
def coco_task(session: Session, name: str, source: str, options: Optional[Variant] = None) -> DataFrame:  # noqa: UP045
    return _call(session, "coco_task", neutral.coco_task, name, source, _object(options))


def coco_evolve(
    session: Session,
    task: str,
    budget: Optional[int] = 60,  # noqa: UP045
    options: Optional[Variant] = None,  # noqa: UP045
) -> DataFrame:
    evolve = functools.partial(neutral.coco_evolve, ai=cortex(session))
    return _call(session, "coco_evolve", evolve, task, _int(budget), _object(options))


def coco_resume(
    session: Session,
    run_id: int,
    budget: Optional[int] = None,  # noqa: UP045
    max_spend: Optional[str] = None,  # noqa: UP045
) -> DataFrame:
    resume = functools.partial(neutral.coco_resume, ai=cortex(session))
    return _call(session, "coco_resume", resume, _int(run_id), _int(budget), max_spend)


def coco_status(session: Session, run_id: Optional[int] = None) -> DataFrame:  # noqa: UP045
    return _call(session, "coco_status", neutral.coco_status, _int(run_id))


def coco_export(
    session: Session,
    run_id: Optional[int] = None,  # noqa: UP045
    form: Optional[str] = "sql",  # noqa: UP045
    max_cost: Optional[str] = None,  # noqa: UP045
    source: Optional[str] = None,  # noqa: UP045
) -> DataFrame:
    staged = functools.partial(_export_staged, session)
    return _call(session, "coco_export", staged, _int(run_id), form, max_cost, source)


def _export_staged(session: Session, store: Any, *arguments: Any) -> list[dict]:
    """coco_export, with the files its code loads (a staged file of examples) put on coco-sql's stage, where
    the returned COPY INTO reads them: the code runs as returned."""
    import io

    from coco_sql.stage import EXPORTS, STAGE

    rows = neutral.coco_export(store, *arguments)
    for row in rows:
        for name, text in (row.pop("files", None) or {}).items():
            session.file.put_stream(
                io.BytesIO(text.encode("utf-8")),
                f"@{STAGE}/{EXPORTS}/{name}",
                auto_compress=False,
                overwrite=True,
            )
    return rows


def coco_eval(session: Session, task: str, program: str, split: Optional[str] = "val") -> DataFrame:  # noqa: UP045
    return _call(session, "coco_eval", neutral.coco_eval, task, program, split)


def coco_report(session: Session, run_id: Optional[int] = None) -> DataFrame:  # noqa: UP045
    return _call(session, "coco_report", neutral.coco_report, _int(run_id))


def coco_help(session: Session, topic: Optional[str] = None) -> DataFrame:  # noqa: UP045
    return _call(session, "coco_help", help_rows, topic)


def cortex(session: Session) -> AiConfig:
    """Models inside Snowflake: Cortex through the procedure's own session, so no API key lives in the
    warehouse (a mutator's `cortex:<model>`, and bare Cortex model names)."""
    return AiConfig(snowpark_session=session, completion_endpoint=CORTEX_ENDPOINT)


def _call(session: Session, name: str, handler: Callable[..., list[dict]], *arguments: Any) -> DataFrame:
    from coco_sql.engines.snowflake.store import SnowparkStore, snowpark_schema

    store = SnowparkStore(session)
    try:
        rows = handler(store, *arguments)
    finally:
        store.close()
    columns = PROCEDURES[name].columns
    schema = snowpark_schema(columns)
    return session.create_dataframe(
        [[neutral.plain_value(row.get(c)) for c, _ in columns] for row in rows], schema=schema
    )


def _object(value: Any) -> dict[str, Any] | None:
    """A VARIANT argument: a dict from `session.call`, JSON text from SQL, or NULL; a one-line ConfigError for
    anything else."""
    import json

    from coco_sql.errors import ConfigError
    from coco_sql.options import as_object

    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ConfigError(
                f"options must be an object such as {{'seed': 1}} (got the text {value[:60]!r})"
            ) from None
    return dict(as_object(value, "options")) if value is not None else None


def _int(value: Any) -> int | None:
    """A NUMBER argument as an int (Snowflake may pass a Decimal or a float); a one-line ConfigError otherwise."""
    if value is None:
        return None
    try:
        number = int(value)
        exact = not isinstance(value, bool | str) and number == value
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact:
        from coco_sql.errors import ConfigError

        raise ConfigError(f"expected a whole number, got {value!r}")
    return number
