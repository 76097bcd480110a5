"""A Snowpark session from the standard `connections.toml` (by connection name), and Snowflake's errors as
one-line `StoreError`s. Used by `coco-sql deploy --connection` and `coco-sql mirror --connection`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from coco_sql.errors import ConfigError, StoreError


def open_session(connection_name: str, command: str) -> Any:
    """A Snowpark Session for `connection_name`; ConfigError naming `command` when Snowpark is not installed."""
    try:
        from snowflake.snowpark import Session
    except ImportError:
        raise ConfigError(
            f"coco-sql {command} needs Snowpark: pip install 'snowflake-snowpark-python[pandas]'"
        ) from None
    with snowflake_errors():
        return Session.builder.config("connection_name", connection_name).create()


@contextlib.contextmanager
def snowflake_errors() -> Iterator[None]:
    """Snowflake's and the connector's errors as one-line `StoreError`s; every other error passes."""
    try:
        yield
    except Exception as error:
        if isinstance(error, ConfigError | StoreError) or not _from_snowflake(type(error)):
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        raise StoreError(f"Snowflake: {message}") from error


def _from_snowflake(kind: type[BaseException] | None) -> bool:
    return kind is not None and any(c.__module__.startswith("snowflake.") for c in kind.__mro__)
