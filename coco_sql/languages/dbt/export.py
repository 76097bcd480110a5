"""Export a dbt champion as a project folder that plain `dbt build` runs against DuckDB (`coco_export(run,
'dbt_project')`, `coco-sql export --form dbt_project --out DIR`).

The folder is the program's own files (its models, YAML, docs and macros exactly as evolved), with
dbt_project.yml pointed at the profile `coco_export`, a `profiles.yml` for a DuckDB file `coco.duckdb` beside
it, and the task's source tables as CSV files under `data/` that an `on-run-start` hook loads into the schemas
the project's `source()` calls read (this hook is ours; a program may not have one). Run it with
``dbt build --profiles-dir .`` in the folder. The export's text form is the files under ``-- file: PATH``
headers, as a project's (`project.DbtProject`), with these extra files allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from coco_sql.errors import ConfigError
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.task import DbtTask
from coco_sql.plugin_loader import SANDBOX_DIALECT, load_engine

FORMS = ("dbt_project", "dbt_patch")
PROFILE = "coco_export"
_HEADER = "-- file: "


def export_files(code: str, task: Any) -> dict[str, str]:
    """The files of the exported folder (path -> text) for program `code` of dbt `task`."""
    project = DbtProject.from_text(code)
    data: DbtTask = task.kind_data
    settings = yaml.safe_load(project.files.get("dbt_project.yml", "")) or {}
    settings["profile"] = PROFILE
    hooks = []
    files: dict[str, str] = dict(project.files)
    for name, frame in _whole_sources(data).items():
        source, table = name.split(".")
        types = data.spec.source_columns[(source, table)]  # type: ignore[index]
        columns = ", ".join(f"'{c}': '{t}'" for c, t in types.items())
        if any(_nested(t) for t in types.values()):  # LIST / STRUCT / MAP columns: one JSON object a line
            path = f"data/{source}.{table}.jsonl"
            files[path] = _json_lines(frame)
            reader = f"read_json('{path}', format = 'newline_delimited', columns = {{{columns}}})"
        else:
            path = f"data/{source}.{table}.csv"
            files[path] = frame.to_csv(index=False)
            reader = f"read_csv('{path}', header = true, columns = {{{columns}}})"
        hooks += [f'create schema if not exists "{source}"',
                  f"create or replace table \"{source}\".\"{table}\" as select * from {reader}"]  # fmt: skip
    settings["on-run-start"] = hooks
    files["dbt_project.yml"] = yaml.safe_dump(settings, sort_keys=False)
    files["profiles.yml"] = yaml.safe_dump(
        {
            PROFILE: {
                "target": "dev",
                "outputs": {"dev": {"type": _adapter(), "path": "coco.duckdb", "threads": 1}},
            }
        }
    )
    return dict(sorted(files.items()))


def _adapter() -> str:
    """profiles.yml's `type`: the dbt adapter of the engine the folder runs on, the sandbox engine's (a DuckDB file)."""
    return str(load_engine(SANDBOX_DIALECT).sql.dbt_adapter)


def _whole_sources(data: DbtTask) -> Mapping[str, Any]:
    """Every source table's rows, all splits together: a table the splits cut is the concatenation of their
    disjoint parts (rows repeated in the raw data stay repeated), a table that follows no entity is whole in
    each split and is taken once. Nothing is hashed, so LIST and STRUCT columns pass as they are."""
    import pandas as pd

    names = list(data.sources["train"])
    return {
        name: (
            pd.concat([data.sources[s][name] for s in data.sources])
            if name in data.cut
            else data.sources["train"][name]
        ).reset_index(drop=True)
        for name in names
    }


def _nested(duckdb_type: str) -> bool:
    text = duckdb_type.upper()
    return text.endswith("[]") or text.startswith(("STRUCT", "MAP", "UNION")) or "[" in text


def _json_lines(frame: Any) -> str:
    """The rows as JSON lines, written by DuckDB (lists and structs as JSON arrays and objects)."""
    import duckdb

    with duckdb.connect(":memory:") as con:
        con.register("_coco_rows", frame)
        lines = con.execute("SELECT to_json(t)::VARCHAR FROM _coco_rows t").fetchall()
    return "".join(line[0] + "\n" for line in lines)


def export_text(code: str, form: str, task: Any) -> str:
    """`export_files` as one text (``-- file: PATH`` headers); ConfigError for a form dbt has not."""
    if form not in FORMS:
        raise ConfigError(f"a dbt program exports as {', '.join(FORMS)} (got {form!r})")
    if form == "dbt_patch":  # a unified diff against the user's project folder (`patch`)
        from coco_sql.languages.dbt.patch import dbt_patch

        return dbt_patch(code, task)
    return "".join(f"{_HEADER}{path}\n{text.rstrip()}\n" for path, text in export_files(code, task).items())


def write_export(text: str, folder: Path) -> list[str]:
    """Write an `export_text` into `folder` (new or empty); the paths written. ConfigError, nothing written,
    for a folder that holds files or a text that is not an export."""
    if text.startswith("diff --git") or not text:  # a dbt_patch: one file (in `folder` when it is a folder)
        target = folder / "coco.patch" if folder.is_dir() else folder
        target.write_text(text, encoding="utf-8")
        return [str(target)]
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"{folder}: the export folder must be new or empty")
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith(_HEADER):
            path = line[len(_HEADER) :]
            parts = Path(path).parts
            if not path or Path(path).is_absolute() or ".." in parts or any(p.startswith(".") for p in parts):
                raise ConfigError(
                    f"the export names the path {path[:100]!r}, which is not a plain relative path"
                )
            current = files.setdefault(path, [])
        elif current is None:
            raise ConfigError("the text is not a dbt_project export (it must start with '-- file: PATH')")
        else:
            current.append(line)
    for path, lines in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sorted(files)
