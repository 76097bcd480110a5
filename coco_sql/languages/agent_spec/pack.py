"""What a data-agent task gives its agent and its search: tables from CSV files, documents, and question rows.

- Tables: each CSV file is read by DuckDB (header row, types inferred), so the types the validator checks columns
  against are the types the sandbox holds.
- Documents (e.g. the business-rule manual): split at their Markdown headings into sections, each with a stable
  id (``manual#5``: the document's name and the section's number in the document). They are offered to the agent
  as one more table, ``documents(document, section, title, text)``, so a free SQL tool can read them and a trace
  shows which sections it read; the offline operators copy such sections into a spec (`ops.py`).
- Questions: one row per task instance with ``id``, ``question``, ``guidelines`` and the expected ``answer``; a
  row without an answer is a task error (one line naming the row), since it could be neither scored nor held out.

The questions file is never a table of the agent: the expected answers stay outside the sandbox.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from coco_sql.errors import TaskError

DOCUMENTS_TABLE = "documents"
DOCUMENT_COLUMNS = {"document": "VARCHAR", "section": "VARCHAR", "title": "VARCHAR", "text": "VARCHAR"}
QUESTION_COLUMNS = ("id", "question", "guidelines", "answer")
_HEADING = re.compile(r"^(#{1,6})\s+(.*\S)\s*$")


@dataclass(frozen=True)
class Question:
    """One task row. `answer` is the expected answer: it goes to the scorer, never to the agent."""

    id: str
    question: str
    guidelines: str
    answer: str
    extra: Mapping[str, str]  # any other column (level, template, ...), for reports


@dataclass(frozen=True)
class Section:
    document: str
    section: str  # "<document>#<n>", n counted from 1 in the document's order
    title: str
    text: str  # the heading line and everything up to the next heading


@dataclass(frozen=True)
class TaskTables:
    """The rows an agent may query, by table name, and each table's column types (as DuckDB reads them)."""

    rows: Mapping[str, pd.DataFrame]
    schemas: Mapping[str, Mapping[str, str]]


def load_tables(files: Mapping[str, Path], documents: Mapping[str, str] | None = None) -> TaskTables:
    """The task's tables: each CSV file in `files` (table name -> path), and the `documents` (name -> text) as
    the table `documents` when there are any. TaskError for a file DuckDB cannot read."""
    rows: dict[str, pd.DataFrame] = {}
    schemas: dict[str, dict[str, str]] = {}
    con = duckdb.connect()
    try:
        for name, path in files.items():
            if name == DOCUMENTS_TABLE and documents:
                raise TaskError(f"table name {DOCUMENTS_TABLE!r} is reserved for the task's documents")
            try:
                relation = con.read_csv(str(path), header=True)
                schemas[name] = dict(zip(relation.columns, (str(t) for t in relation.types), strict=True))
                rows[name] = relation.df()
            except duckdb.Error as error:
                raise TaskError(
                    f"table {name}: cannot read {path} ({' '.join(str(error).split())[:200]})"
                ) from None
    finally:
        con.close()
    if documents:
        sections = [s for name, text in documents.items() for s in document_sections(name, text)]
        rows[DOCUMENTS_TABLE] = pd.DataFrame(
            [[s.document, s.section, s.title, s.text] for s in sections], columns=list(DOCUMENT_COLUMNS)
        )
        schemas[DOCUMENTS_TABLE] = dict(DOCUMENT_COLUMNS)
    return TaskTables(rows, schemas)


def document_sections(name: str, text: str) -> list[Section]:
    """`text` split before each Markdown heading (outside code fences); text before the first heading is
    section 0's when there is any."""
    sections: list[Section] = []
    title, lines, fenced = "", [], False

    def close() -> None:
        body = "\n".join(lines).strip()
        if body:
            sections.append(Section(name, f"{name}#{len(sections) + 1}", title, body))

    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        heading = None if fenced else _HEADING.match(line)
        if heading:
            close()
            title, lines = heading.group(2).strip(), [line]
        else:
            lines.append(line)
    close()
    return sections


def load_questions(path: Path) -> list[Question]:
    """The question rows of a CSV file with at least the columns id, question, guidelines, answer; TaskError
    (one line, naming the row) for a missing column, an empty or repeated id, or a row without an answer."""
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            columns = reader.fieldnames or []
            missing = [c for c in QUESTION_COLUMNS if c not in columns]
            if missing:
                raise TaskError(
                    f"{path.name}: no column {missing[0]!r} (needs {', '.join(QUESTION_COLUMNS)})"
                )
            return _questions(path.name, list(reader))
    except OSError as error:
        raise TaskError(f"questions file {path}: cannot read it ({error.strerror})") from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise TaskError(f"questions file {path}: not a UTF-8 CSV file ({error})") from None


def _questions(source: str, rows: Sequence[Mapping[str, str | None]]) -> list[Question]:
    questions, seen = [], set()
    for number, row in enumerate(rows, start=2):  # line 1 is the header
        where = f"{source} line {number}"
        key = (row.get("id") or "").strip()
        if not key:
            raise TaskError(f"{where}: the id is empty")
        if key in seen:
            raise TaskError(f"{where}: id {key!r} appears twice")
        seen.add(key)
        if not (row.get("question") or "").strip():
            raise TaskError(f"{where} (id {key}): the question is empty")
        if not (row.get("answer") or "").strip():
            raise TaskError(
                f"{where} (id {key}): no expected answer (the answer column is empty); every row needs one"
            )
        extra = {k: v or "" for k, v in row.items() if k not in QUESTION_COLUMNS and k is not None}
        questions.append(
            Question(key, row["question"] or "", row.get("guidelines") or "", row["answer"] or "", extra)
        )
    if not questions:
        raise TaskError(f"{source}: no question rows")
    return questions
