"""What the coding agent is told a dbt program is (the kind's `program_prompt`): the project's text form and file
layout, the sources it reads (and their names in `query`), the targets it is scored on, how to edit one file, and
what a draft test runs and shows. Built from the task alone (never from expected rows): the seed project's files
and model graph, the sources' columns, the targets' keys, columns and tolerances.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.language import probe_tables
from coco_sql.languages.dbt.project import MARKER, DbtProject
from coco_sql.languages.dbt.report_parts import program_parts
from coco_sql.languages.dbt.task import DbtTask

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack


def program_prompt(task: TaskPack) -> str:
    data = task.kind_data
    if not isinstance(data, DbtTask):
        return _GENERIC
    targets = {t.model for t in data.targets}
    lines = [
        f"A program is a dbt project, run by dbt-core with dbt-duckdb (SQL dialect: {task.dialect}). It is held "
        f"as one text: its files in path order, each under a line '{MARKER}PATH'. A project may hold "
        "dbt_project.yml, models/**/*.sql (one model each, named by the file), models/**/*.yml (properties, "
        "sources, data tests) and *.md (docs blocks) under models/, and macros/*.sql; no seeds or profiles: "
        "the data are the task's sources.",
        "",
        "The seed project's files (a child may change, add or remove models):",
        *_layout(task.seed_program, targets),
        "",
        "The sources (inputs, the same for every program). A model reads one as {{ source('SOURCE', 'TABLE') "
        "}}; `query` reads the training split's copy under the name shown, next to `input` (the training "
        "instance ids):",
    ]
    names = dict(zip(data.sources["train"], probe_tables(data.sources["train"]), strict=True))
    for (source, table), columns in sorted((data.spec.source_columns or {}).items()):
        typed = ", ".join(f"{c} {t}" for c, t in columns.items())
        lines.append(f"- {source}.{table} (query: {names.get(f'{source}.{table}', table)}): {typed}")
    lines += [
        "",
        "The targets: each model's rows are compared, key by key, with expected rows on these columns:",
    ]
    for target in data.targets:
        columns = ", ".join(
            c + (f" (±{target.tolerances[c].abs_tol:g})" if c in target.tolerances else "")
            for c in target.columns
        )
        lines.append(f"- {target.model}: key {target.key}; {columns}")
    tests = (
        f" and the project's data tests on them ({len(data.tests)}, each an instance)" if data.tests else ""
    )
    lines += [
        f"An instance is one target key (id 'MODEL:KEY'){tests}. A key scores 1 when its row matches in every "
        "compared column; a missing row, a duplicated key or one wrong column scores 0.",
        "",
        f"To edit one file, start `edit_candidate`'s `search` with that file's '{MARKER}PATH' line: the rest of "
        "`search` is then matched within that file's lines only (it must occur there exactly once), and the "
        "marker line stays as it is. `write_candidate` takes the whole project text, every file under its "
        "marker line. `test_draft` runs the project with dbt on the training split's sources (`dbt run`, then "
        "`dbt test`, of the targets and every model they read) and shows, per target, the columns that mismatch and rows with the output against the expected value of each "
        "column that differs.",
    ]
    return "\n".join(lines) + "\n"


_GENERIC = (
    f"A program is a dbt project: files under '{MARKER}PATH' headers (dbt_project.yml, models/**/*.sql and "
    "*.yml, macros/*.sql); its target models are compared with the expected rows by key.\n"
)


def _layout(code: str, targets: set[str]) -> list[str]:
    """One line per file of the project `code`: its role and, for a model, what it reads."""
    try:
        project = DbtProject.from_text(code)
    except CandidateRejected:
        return ["- (the seed does not parse as a project)"]
    parts = program_parts(code)
    reads: dict[str, list[str]] = {}
    for upstream, model in parts.edges if parts is not None else ():
        reads.setdefault(model, []).append(upstream)
    names = {path: name for name, path in project.models().items()}
    lines = []
    for path in project.files:
        if path in names:
            name = names[path]
            role = f"model {name}" + (" (a target)" if name in targets else "")
            upstream = reads.get(name)
            lines.append(f"- {path}: {role}" + (f", reads {', '.join(upstream)}" if upstream else ""))
        elif path.endswith(".yml"):
            lines.append(
                f"- {path}: " + ("project config" if path == "dbt_project.yml" else "properties and tests")
            )
        elif path.endswith(".md"):
            lines.append(f"- {path}: docs blocks")
        else:
            lines.append(f"- {path}: macros")
    return lines
