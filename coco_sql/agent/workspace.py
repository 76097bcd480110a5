"""The agent's workspace: the candidate program it is editing, with whole-file writes and search/replace edits.

An edit names text that must occur exactly once in the candidate; anything else is a one-line error the agent
can act on (the workspace is unchanged).

A program of several files in one text (a kind plug-in's `file_marker`: a dbt project is its files, each under a
line ``-- file: PATH``) may be edited one file at a time: a `search` whose first line is a file's marker line
names that file, and the rest of `search` must then occur exactly once in that file's lines, which is where it is
replaced. The marker line is a scope, not text to replace: a `replace` that repeats it as its first line keeps
the file where it is. So the same lines in two files (`amount` in a staging model and a mart) need no context
beyond the file's name.
"""

from __future__ import annotations


class WorkspaceError(ValueError):
    """An edit that cannot apply; its message is shown to the agent."""


class Workspace:
    def __init__(self, code: str, file_marker: str | None = None) -> None:
        self.code = code
        self.edits = 0
        self.file_marker = file_marker

    def write(self, code: str) -> str:
        if not code.strip():
            raise WorkspaceError("the candidate cannot be empty")
        self.code = code
        self.edits += 1
        return f"wrote the candidate ({len(code.splitlines())} lines)"

    def edit(self, search: str, replace: str) -> str:
        if not search:
            raise WorkspaceError("`search` is empty: name the exact text to replace")
        header, _, rest = search.partition("\n")
        if self.file_marker and header.startswith(self.file_marker):
            return self._edit_file(header.rstrip(), rest, replace)
        found = self.code.count(search)
        if found == 0:
            raise WorkspaceError("`search` does not occur in the candidate (read_candidate shows it exactly)")
        if found > 1:
            hint = (f", or start `search` with the file's '{self.file_marker}PATH' line to edit that file only"
                    if self.file_marker else "")  # fmt: skip
            raise WorkspaceError(
                f"`search` occurs {found} times in the candidate: include more context{hint}"
            )
        self.code = self.code.replace(search, replace, 1)
        self.edits += 1
        return "edited the candidate"

    def _edit_file(self, header: str, search: str, replace: str) -> str:
        """Replace `search` inside the file whose marker line is `header` (see the module docstring)."""
        path = header[len(self.file_marker or "") :].strip()
        start, end = self._section(header, path)
        if not search:
            raise WorkspaceError(
                f"`search` names the file {path} but no text in it: put the lines to replace after its "
                f"'{header}' line"
            )
        body = self.code[start:end]
        found = body.count(search)
        if found != 1:
            where = "does not occur" if found == 0 else f"occurs {found} times"
            more = "" if found == 0 else ": include more context"
            raise WorkspaceError(f"`search` (after its file line) {where} in {path}{more}")
        first, _, after = replace.partition("\n")
        if first.rstrip() == header:  # the replacement repeats the scope: the file stays where it is
            replace = after
        self.code = self.code[:start] + body.replace(search, replace, 1) + self.code[end:]
        self.edits += 1
        return f"edited {path}"

    def _section(self, header: str, path: str) -> tuple[int, int]:
        """The character span of the file under `header`: from after its marker line to the next marker line."""
        marker = self.file_marker or ""
        lines = self.code.splitlines(keepends=True)
        offsets, position = [], 0
        for line in lines:
            offsets.append(position)
            position += len(line)
        heads = [i for i, line in enumerate(lines) if line.startswith(marker)]
        mine = [i for i in heads if lines[i].rstrip() == header]
        if len(mine) != 1:
            files = ", ".join(lines[i][len(marker) :].strip() for i in heads)
            if mine:
                raise WorkspaceError(f"the file {path} appears {len(mine)} times in the candidate")
            raise WorkspaceError(f"the candidate has no file {path} (files: {files or 'none'})")
        at = mine[0]
        following = [i for i in heads if i > at]
        end = offsets[following[0]] if following else len(self.code)
        return offsets[at] + len(lines[at]), end
