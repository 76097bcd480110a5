"""A dbt task pack read from its folder: task.toml, the source tables and the expected rows (`tasks.loader` hands
a pack whose `language = "dbt"` to `load_dbt_pack`; `task.assemble_dbt_task` checks and builds the task).

Files: a source table is a CSV file read with the column types task.toml gives, or a Parquet file (any DuckDB
type: LIST and STRUCT columns too) cast to them; a target's expected rows are a CSV file (every cell text, read
loosely by `compare`) or a Parquet file (typed). The seed is a folder: inside the pack, or the dbt project the
pack was made from (`coco-sql init dbt`: a folder holding dbt_project.yml), read as it stands. The fingerprint
covers task.toml, every file it names, and the seed project's text (not a project's target/ or logs/).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import PROJECT_FILE, DbtProject
from coco_sql.languages.dbt.task import DbtTables, assemble_dbt_task, check_source_name
from coco_sql.tasks.pack_files import Reader, check_duckdb_type, display

_TOP = ("name", "description", "language", "dialect", "program", "sources", "splits", "targets", "data_tests",
        "source")  # fmt: skip


def _sources(reader: Reader, root: Path, doc: Mapping[str, Any], con: duckdb.DuckDBPyConnection) -> tuple[
    dict[str, pd.DataFrame], dict[tuple[str, str], dict[str, str]]
]:  # fmt: skip
    entries = doc.get("sources")
    if not isinstance(entries, list) or not entries:
        raise reader.error("sources", "a dbt pack needs at least one [[sources]] table")
    tables: dict[str, pd.DataFrame] = {}
    columns: dict[tuple[str, str], dict[str, str]] = {}
    for i, entry in enumerate(entries):
        key = f"sources[{i}]"
        if not isinstance(entry, dict):
            raise reader.error(key, "must be a table")
        reader.check_keys(entry, key, ("name", "file", "columns"))
        name = reader.get(entry, f"{key}.name", str)
        check_source_name(reader, f"{key}.name", name)
        path = reader.file_path(root, entry, f"{key}.file")
        types = reader.get(entry, f"{key}.columns", dict)
        checked = {c: check_duckdb_type(reader, f"{key}.columns.{c}", str(t), con) for c, t in types.items()}
        spec = ", ".join(f"'{c}': '{t}'" for c, t in checked.items())
        casts = ", ".join(f'CAST("{c}" AS {t}) AS "{c}"' for c, t in checked.items())
        try:
            if str(path).endswith(".parquet"):
                frame = con.execute(f"SELECT {casts} FROM read_parquet(?)", [str(path)]).df()
            else:
                frame = con.execute(
                    f"SELECT * FROM read_csv(?, header = true, columns = {{{spec}}})", [str(path)]
                ).df()
        except duckdb.Error as error:
            raise reader.error(
                f"{key}.file", f"{display(path)}: {' '.join(str(error).split())[:200]}"
            ) from None  # type: ignore[arg-type]
        tables[name] = frame
        source, table = name.split(".")
        columns[(source, table)] = checked
    return tables, columns


def expected_files(reader: Reader, root: Path, doc: Mapping[str, Any]) -> list[tuple[pd.DataFrame, str]]:
    """Each target's expected rows as read from its CSV file (every cell text), and how messages name it."""
    found = []
    for i, entry in enumerate(doc.get("targets") or []):
        if not isinstance(entry, dict):
            raise reader.error(f"targets[{i}]", "must be a table")
        path = reader.file_path(root, entry, f"targets[{i}].expected")
        if str(path).endswith(".parquet"):
            with duckdb.connect(":memory:") as con:
                frame = con.execute("SELECT * FROM read_parquet(?)", [str(path)]).df()
        else:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False, na_values=[""])  # type: ignore[arg-type]
        found.append((frame, display(path)))  # type: ignore[arg-type]
    return found


def load_dbt_pack(root: Path, reader: Reader, doc: Mapping[str, Any], fingerprint: Any) -> Any:
    """The `TaskPack` of a dbt pack (see the module docstring); TaskError (one line) for anything wrong."""
    reader.check_keys(doc, "", _TOP)
    name = reader.get(doc, "name", str)
    if name != root.name:
        raise reader.error("name", f"must equal the pack directory name {root.name!r} (got {name!r})")
    program = reader.table(doc, "program", ("seed", "allowed_functions", "timeout_seconds"))
    seed_dir = root / reader.get(program, "program.seed", str)
    inside = seed_dir.resolve().is_relative_to(root.resolve())
    if not seed_dir.is_dir() or not (inside or (seed_dir / PROJECT_FILE).is_file()):
        raise reader.error(
            "program.seed",
            f"must be a folder inside the pack or a dbt project folder (got {display(seed_dir)})",
        )
    try:
        seed = DbtProject.from_dir(seed_dir)
    except CandidateRejected as error:
        raise reader.error("program.seed", str(error)) from None
    with duckdb.connect(":memory:") as con:
        tables, source_columns = _sources(reader, root, doc, con)
    expected = expected_files(reader, root, doc)
    named = [root / str(e["file"]) for e in doc["sources"]] + [
        root / str(e["expected"]) for e in doc["targets"]
    ]
    digest = hashlib.sha256(fingerprint(root, [reader.path, *named]).encode())
    digest.update(seed.to_text().encode())
    return assemble_dbt_task(reader, doc, DbtTables(seed, tables, source_columns, expected),
                             root=root, fingerprint=digest.hexdigest(), seed_dir=seed_dir.resolve())  # fmt: skip
