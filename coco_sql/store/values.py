"""Result values of either engine as plain JSON-able Python, for the named queries' rows and the records."""

from __future__ import annotations

import math
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

_PLAIN_TYPES = frozenset((bool, int, float, str))


def python_value(value: Any) -> Any:
    """A result value as DuckDB's Python API gives it, whichever engine produced it (a Snowflake result comes as
    a pandas frame): a missing value (None, NaN, NaT, NA) -> None, numpy scalars -> Python numbers, a pandas
    timestamp -> datetime, a whole Decimal -> int (another -> float). Text, JSON text and lists stay."""
    if value is None or type(value) in _PLAIN_TYPES:
        return None if isinstance(value, float) and math.isnan(value) else value
    if type(value).__name__ in ("NaTType", "NAType"):  # pandas' missing timestamp and missing value
        return None
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    to_datetime = getattr(value, "to_pydatetime", None)
    if callable(to_datetime):  # pandas Timestamp
        return to_datetime()
    if hasattr(value, "item") and getattr(value, "ndim", 0) == 0:  # numpy scalar
        return python_value(value.item())
    return value


def plain(value: Any) -> Any:
    """Decimal -> float, timestamps -> ISO text, numpy scalars and arrays -> Python numbers and lists, lists and
    structs recursively; a missing value (None, NaN, pandas' NaT) -> None. JSON columns stay text (callers
    parse them)."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ == "NaTType":
        return None
    if type(value) in _PLAIN_TYPES:
        return value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # numpy array or scalar (a scalar's tolist() is its Python value)
        return plain(value.tolist())
    return str(value)
