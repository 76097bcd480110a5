"""Conversion of cell values to a contract type.

Two directions share these rules so that expected values (read from a pack's CSV) and candidate outputs
(read back from DuckDB or a warehouse) end up as the same Python types and compare cleanly:

* ``INTEGER`` -> ``int``, ``DOUBLE`` -> ``float``, ``VARCHAR`` -> ``str``, ``BOOLEAN`` -> ``bool``,
  ``VARCHAR[]`` -> ``list[str]``.
* A missing cell (``None``, pandas ``NA``/``NaT``, float ``NaN``) stays ``None``: scorers give it 0, so a
  NULL is never confused with a wrong-but-present value.
* Anything that cannot be converted raises ``ValueError``; the evaluator records it as a failed row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

import numpy as np
import pandas as pd

from coco_sql.bounded import json_value

#: The contract types a pack may declare, in the order error messages list them.
CONTRACT_TYPES: tuple[str, ...] = ("INTEGER", "DOUBLE", "VARCHAR", "BOOLEAN", "VARCHAR[]")

#: Separator used to split a string into a ``VARCHAR[]`` when nothing more specific is known.
DEFAULT_LIST_SEPARATOR = ";"

#: The Python type of each scalar contract type on which `coerce_output` is the identity (for DOUBLE: but NaN,
#: which is missing). `bool` is not an `int` here: types are compared exactly.
_NATIVE: dict[str, type] = {"INTEGER": int, "DOUBLE": float, "VARCHAR": str, "BOOLEAN": bool}

_TRUE_STRINGS = frozenset({"true", "t", "yes", "y", "1"})
_FALSE_STRINGS = frozenset({"false", "f", "no", "n", "0"})


def is_missing(value: object) -> bool:
    """True for the spellings of NULL that DuckDB/pandas hand back (None, NA, NaT, float NaN)."""
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    return isinstance(value, float | np.floating) and math.isnan(float(value))


def _to_int(value: object) -> int:
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"expected an INTEGER, got a BOOLEAN ({value!r})")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, float | np.floating | Decimal):
        number = float(value)
        if not math.isfinite(number) or number != int(number):
            raise ValueError(f"expected an INTEGER, got non-integral {value!r}")
        return int(number)
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            dec = Decimal(text)
        except InvalidOperation:
            raise ValueError(f"expected an INTEGER, got {value!r}") from None
        if not dec.is_finite() or dec != dec.to_integral_value():
            raise ValueError(f"expected an INTEGER, got {value!r}")
        return int(dec)
    raise ValueError(f"expected an INTEGER, got {type(value).__name__} {value!r}")


def _to_float(value: object) -> float:
    if isinstance(value, bool | np.bool_):
        raise ValueError(f"expected a DOUBLE, got a BOOLEAN ({value!r})")
    if isinstance(value, int | float | np.integer | np.floating | Decimal):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise ValueError(f"expected a DOUBLE, got {value!r}") from None
        if math.isnan(number):
            raise ValueError(f"expected a DOUBLE, got {value!r}")
        return number
    raise ValueError(f"expected a DOUBLE, got {type(value).__name__} {value!r}")


def _to_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | float | np.integer | np.floating | Decimal):
        return str(value.item() if isinstance(value, np.generic) else value)
    raise ValueError(f"expected a VARCHAR, got {type(value).__name__} {value!r}")


def _to_bool(value: object) -> bool:
    if isinstance(value, bool | np.bool_):
        return bool(value)
    if isinstance(value, int | np.integer) and int(value) in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE_STRINGS:
            return True
        if text in _FALSE_STRINGS:
            return False
    raise ValueError(f"expected a BOOLEAN, got {value!r}")


def _to_str_list(value: object, separator: str) -> list[str]:
    """Lists come back from DuckDB as lists, from Snowflake ARRAYs as JSON text, from CSVs as joined text."""
    if isinstance(value, np.ndarray):
        value = value.tolist()
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                parsed = json_value(text)
            except ValueError:
                raise ValueError(f"expected a VARCHAR[], got malformed JSON array {value!r}") from None
            return _to_str_list(parsed, separator)
        return [part.strip() for part in text.split(separator) if part.strip()]
    if isinstance(value, list | tuple):
        items: list[str] = []
        for item in value:
            if is_missing(item):
                continue
            if isinstance(item, list | tuple | dict | np.ndarray):
                raise ValueError(f"expected a VARCHAR[], got a nested value {value!r}")
            items.append(_to_str(item))
        return items
    raise ValueError(f"expected a VARCHAR[], got {type(value).__name__} {value!r}")


def coerce_output(value: object, type_: str, *, separator: str = DEFAULT_LIST_SEPARATOR) -> object:
    """Convert one output cell to ``type_`` (a contract type), or raise ``ValueError``.

    Lenient on representation (``"3"``, ``3.0`` and ``numpy.int32(3)`` are all the INTEGER 3, since a
    candidate's SUM or a warehouse driver may widen types) but strict on meaning (``3.5`` is not an
    INTEGER). Missing cells return ``None``. For ``VARCHAR[]`` a string is read as a JSON array when it
    starts with ``[`` and otherwise split on ``separator``.
    """
    if is_missing(value):
        return None
    if type_ == "INTEGER":
        return _to_int(value)
    if type_ == "DOUBLE":
        return _to_float(value)
    if type_ == "VARCHAR":
        return _to_str(value)
    if type_ == "BOOLEAN":
        return _to_bool(value)
    if type_ == "VARCHAR[]":
        return _to_str_list(value, separator)
    raise ValueError(f"unknown contract type {type_!r} (known: {', '.join(CONTRACT_TYPES)})")


def coerce_outputs(
    values: Sequence[object], type_: str, *, separator: str = DEFAULT_LIST_SEPARATOR
) -> tuple[list[object | None], dict[int, str]]:
    """`coerce_output` of every value of a column: (the converted values, position -> the `ValueError` message
    of each value that does not convert; those positions hold None). The same values and messages as calling
    `coerce_output` row by row, only faster.

    Why: the evaluator converts every output of a program, a million per evaluation on a warehouse table, and
    nearly always they already are of the contract's Python type (DuckDB gives an INTEGER label as an `int`),
    where conversion is the identity. So a column of only such values and None (checked by one C-level pass
    over the types) comes back as it is, with NaN (a missing DOUBLE) as None; in any other column each value of
    that exact type is kept and only the others go through `coerce_output`."""
    native = _NATIVE.get(type_)
    if native is not None:
        kinds = set(map(type, values))
        if kinds <= {native, type(None)}:
            converted = list(values)
            if native is float:  # NaN != NaN: the only float that is missing
                for k in [k for k, value in enumerate(converted) if value != value]:
                    converted[k] = None
            return converted, {}
    converted = []
    failures: dict[int, str] = {}
    for k, value in enumerate(values):
        if value is None:
            converted.append(None)
        elif type(value) is native and value == value:
            converted.append(value)
        else:
            try:
                converted.append(coerce_output(value, type_, separator=separator))
            except ValueError as error:
                converted.append(None)
                failures[k] = str(error)
    return converted, failures


def parse_expected(raw: str, type_: str, *, separator: str = DEFAULT_LIST_SEPARATOR) -> object:
    """Parse an expected value as written in a pack CSV; raise ``ValueError`` if it does not fit ``type_``.

    Unlike outputs, an expected value is never missing: an empty cell is the empty string for VARCHAR
    and the empty list for VARCHAR[], and an error for the other types.
    """
    if type_ in ("INTEGER", "DOUBLE", "BOOLEAN") and not raw.strip():
        raise ValueError(f"empty value is not a valid {type_}")
    parsed = coerce_output(raw, type_, separator=separator)
    if parsed is None:  # pragma: no cover - a str is never missing
        raise ValueError(f"missing value is not a valid {type_}")
    return parsed
