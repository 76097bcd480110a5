"""`coco-sql export --form dbt_patch`: the champion as a unified diff against the user's project, for `git apply`.

The diff is taken against the files as they are on disk in the folder the task was made from (`DbtTask.seed_dir`),
not against the program's canonical text: a file with CRLF line ends, trailing blank lines or no final newline
gets hunks that apply to it as it is (the changed lines written with its line ends; ``\\ No newline at end of
file`` where git needs it). A file the champion adds is a new-file diff, one it drops a deletion. Files the
mutator never edits (package macros) are never in it. A task without a folder (registered from tables) gets the
diff against its seed text.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from coco_sql.languages.dbt.project import DbtProject, normalise

CONTEXT = 3


def dbt_patch(code: str, task: Any) -> str:
    """The patch from the task's seed project (as on disk) to the program `code`; empty when they agree."""
    seed, champion = DbtProject.from_text(task.seed_program), DbtProject.from_text(code)
    folder: Path | None = getattr(task.kind_data, "seed_dir", None)
    parts = []
    for path in sorted(set(seed.files) | set(champion.files)):
        before, after = seed.files.get(path), champion.files.get(path)
        if before == after:
            continue
        on_disk = folder / path if folder is not None else None
        original = (
            on_disk.read_bytes().decode("utf-8") if on_disk is not None and on_disk.is_file() else before
        )
        if original is not None and before is not None and normalise(original) != before:
            original = before  # the folder changed since the task was made: against the seed as it was read
        parts.append(file_patch(path, original, after))
    return "".join(parts)


def file_patch(path: str, original: str | None, new: str | None) -> str:
    """A git-style diff of one file from `original` (as written; None: absent) to `new` (canonical text;
    None: deleted), keeping the original's line ends and trailing blank lines."""
    crlf = original is not None and "\r\n" in original
    old_lines = _lines(original)
    new_lines = _lines(_like(original, new, crlf)) if new is not None else []
    header = f"diff --git a/{path} b/{path}\n"
    if original is None:
        header += "new file mode 100644\n"
    elif new is None:
        header += "deleted file mode 100644\n"
    body = difflib.unified_diff(
        old_lines, new_lines, fromfile="/dev/null" if original is None else f"a/{path}",
        tofile="/dev/null" if new is None else f"b/{path}", n=CONTEXT,
    )  # fmt: skip
    out = []
    for line in body:
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\r\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:  # a last line without its newline
            out.append(line + "\n\\ No newline at end of file\n")
    return header + "".join(out)


def _like(original: str | None, new: str, crlf: bool) -> str:
    """`new` (canonical: LF, one final newline) written as `original` was: its line ends, its trailing blank
    lines, its missing final newline."""
    text = new
    if original is not None:
        stripped = original.replace("\r\n", "\n")
        trailing = stripped[len(stripped.rstrip("\n")) :]
        if not trailing:  # no final newline
            text = text.removesuffix("\n")
        elif len(trailing) > 1:
            text = text + trailing[1:]
    return text.replace("\n", "\r\n") if crlf else text


def _lines(text: str | None) -> list[str]:
    return [] if text is None else text.splitlines(keepends=True)
