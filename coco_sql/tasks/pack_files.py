"""Reading a task pack's files with one-line errors: typed keys of task.toml (`Reader`), DuckDB type names, and
the pool and test CSVs as typed input tables with parsed expected values (`load_table`, `make_split`).

Every problem becomes a `TaskError` that names the file and the key, as the loader's docstring promises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from coco_sql.errors import TaskError
from coco_sql.options import Option
from coco_sql.tasks.coerce import parse_expected
from coco_sql.tasks.splits import Split

_DUCKDB_TYPE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_ ]*(\(\s*\d+\s*(,\s*\d+\s*)?\))?(\[\])*$")


def display(path: Path) -> str:
    """Paths in messages are relative to the CWD when possible (``tasks/foo/task.toml``)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def type_name(value: object) -> str:
    names = {bool: "boolean", int: "integer", float: "float", str: "string", list: "array", dict: "table"}
    return names.get(type(value), type(value).__name__)


def short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class Reader:
    """Typed access to a parsed task.toml that turns every problem into a one-line TaskError."""

    def __init__(self, toml_path: Path) -> None:
        self.path = toml_path
        self.file = display(toml_path)

    def error(self, key: str, problem: str) -> TaskError:
        return TaskError(f"{self.file}: key '{key}': {problem}")

    def table(
        self, parent: Mapping[str, Any], key: str, allowed: Sequence[str], *, required: bool = True
    ) -> dict[str, Any]:
        """Sub-table ``key`` of ``parent``; ``key`` is dotted from the root (``data.input_columns``)."""
        local = key.rsplit(".", 1)[-1]
        if local not in parent:
            if required:
                raise self.error(key, "missing required section")
            return {}
        value = parent[local]
        if not isinstance(value, dict):
            raise self.error(key, f"expected a table, got {type_name(value)} {short(value)}")
        self.check_keys(value, key, allowed)
        return value

    def check_keys(self, table: Mapping[str, Any], prefix: str, allowed: Sequence[str]) -> None:
        for name in table:
            if name not in allowed:
                full = f"{prefix}.{name}" if prefix else name
                raise self.error(full, f"unknown key (allowed: {', '.join(allowed) or 'none'})")

    def get(
        self, table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any = ...
    ) -> Any:
        """Value of ``key`` (dotted) in ``table`` checked against ``kind``; ints are accepted as floats."""
        local = key.rsplit(".", 1)[-1]
        if local not in table:
            if default is ...:
                raise self.error(key, "missing required key")
            return default
        value = table[local]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        ok = False if isinstance(value, bool) and bool not in kinds else isinstance(value, kinds)
        if not ok:
            wanted = " or ".join(type_name(k()) for k in kinds)
            raise self.error(key, f"expected {wanted}, got {type_name(value)} {short(value)}")
        return value

    def choice(self, table: Mapping[str, Any], key: str, choices: Sequence[str], default: Any = ...) -> str:
        value = self.get(table, key, str, default)
        if value not in choices:
            raise self.error(key, f"must be one of {', '.join(choices)} (got {value!r})")
        return value

    def file_path(self, root: Path, table: Mapping[str, Any], key: str, default: Any = ...) -> Path | None:
        """A file inside the pack; absolute paths, ``..`` and symbolic links (a link, or a folder on the way that
        is one) are refused, so a pack never reads outside itself."""
        value = self.get(table, key, str, default)
        if value is None:
            return None
        relative = Path(value)
        if relative.is_absolute() or ".." in relative.parts:
            raise self.error(key, f"must be a relative path inside the pack (got {value!r})")
        path = root / relative
        linked = [root / Path(*relative.parts[: i + 1]) for i in range(len(relative.parts))]
        if any(p.is_symlink() for p in linked) or not path.resolve().is_relative_to(root.resolve()):
            raise self.error(key, f"{display(path)} is a symbolic link: a pack's files must be inside it")
        if not path.is_file():
            raise self.error(key, f"file not found: {display(path)}")
        return path

    def bounded(self, table: Mapping[str, Any], key: str, option: Option) -> Any:
        """Value of ``key`` checked against `option`'s type and range (`coco_sql.options`, the same bounds a
        task registered from rows gets), with its default."""
        value = self.get(table, key, float if option.kind == "number" else int, option.default)
        try:
            return option.check(value, error=TaskError)
        except TaskError:
            raise self.error(key, f"must be {option.expects()} (got {short(value)})") from None


def check_duckdb_type(reader: Reader, key: str, type_: str, con: duckdb.DuckDBPyConnection) -> str:
    if not _DUCKDB_TYPE_RE.match(type_):
        raise reader.error(key, f"not a DuckDB type name (got {type_!r})")
    try:
        con.execute(f"SELECT CAST(NULL AS {type_})").fetchall()
    except duckdb.Error as error:
        first = str(error).strip().splitlines()[0]
        raise reader.error(key, f"unknown DuckDB type {type_!r} ({first})") from None
    return type_.upper()


def read_csv(path: Path) -> pd.DataFrame:
    """Every cell as a string ('' for empty), so ids with leading zeros and codes like '012345' survive."""
    try:
        return pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8")
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TaskError(f"{display(path)}: cannot read CSV: {first}") from None


@dataclass(frozen=True)
class Table:
    """One data file after validation: typed inputs (``id`` + input columns) and parsed expected values."""

    inputs: pd.DataFrame
    expected: dict[str, object]


def load_table(
    path: Path,
    reader: Reader,
    *,
    id_column: str,
    expected_column: str,
    input_columns: Mapping[str, str],
    contract_type: str,
    separator: str,
    con: duckdb.DuckDBPyConnection,
) -> Table:
    raw = read_csv(path)
    csv = display(path)
    required = {id_column: "data.id_column", expected_column: "data.expected_column"}
    required.update({name: f"data.input_columns.{name}" for name in input_columns})
    for column, key in required.items():
        if column not in raw.columns:
            present = ", ".join(map(str, raw.columns))
            raise TaskError(
                f"{csv}: missing column '{column}' (key '{key}' in {reader.file}); columns present: {present}"
            )
    ids = raw[id_column].str.strip()
    for line, value in enumerate(ids, start=2):
        if not value:
            raise TaskError(f"{csv}: line {line}: empty id (key 'data.id_column')")
    duplicated = ids[ids.duplicated()]
    if len(duplicated):
        raise TaskError(f"{csv}: duplicate id '{duplicated.iloc[0]}' (key 'data.id_column')")

    expected: dict[str, object] = {}
    for row_id, value in zip(ids, raw[expected_column], strict=True):
        try:
            expected[row_id] = parse_expected(value, contract_type, separator=separator)
        except ValueError as error:
            raise TaskError(
                f"{csv}: id '{row_id}': column '{expected_column}' value {short(value)} is not a valid "
                f"{contract_type} (key 'contract.type'): {error}"
            ) from None

    frame = pd.DataFrame({"__row": range(len(raw)), "id": ids.tolist()})
    for name in input_columns:
        frame[name] = raw[name].tolist()
    select = ["id"]
    for name, type_ in input_columns.items():
        if type_ == "VARCHAR":
            select.append(f'"{name}"')
        else:
            select.append(f'TRY_CAST(NULLIF("{name}", \'\') AS {type_}) AS "{name}"')
    con.register("raw_table", frame)
    try:
        typed = con.execute(f"SELECT {', '.join(select)} FROM raw_table ORDER BY __row").df()
    finally:
        con.unregister("raw_table")
    for name, type_ in input_columns.items():
        if type_ == "VARCHAR":
            continue
        bad = (raw[name] != "").to_numpy() & typed[name].isna().to_numpy()
        if bad.any():
            index = int(bad.argmax())
            raise TaskError(
                f"{csv}: id '{ids.iloc[index]}': column '{name}' value {short(raw[name].iloc[index])} "
                f"is not a valid {type_} (key 'data.input_columns.{name}')"
            )
    # VARCHAR columns are taken verbatim (plain Python str, object dtype) rather than DuckDB's string dtype,
    # so every consumer sees the exact CSV text; ORDER BY __row keeps both frames aligned.
    typed["id"] = pd.Series(ids.tolist(), dtype=object)
    for name, type_ in input_columns.items():
        if type_ == "VARCHAR":
            typed[name] = pd.Series(raw[name].tolist(), dtype=object)
    return Table(inputs=typed, expected=expected)


def make_split(name: str, ids: Sequence[str], tables: Sequence[Table]) -> Split:
    wanted = set(ids)
    parts = [t.inputs[t.inputs["id"].isin(wanted)] for t in tables]
    inputs = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    inputs = inputs.sort_values("id", kind="stable").reset_index(drop=True)
    expected: dict[str, object] = {}
    for table in tables:
        expected.update({i: v for i, v in table.expected.items() if i in wanted})
    return Split(name=name, inputs=inputs, expected={i: expected[i] for i in inputs["id"]})
