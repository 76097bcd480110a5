"""The agent's workspace: the candidate program it is editing, with whole-file writes and search/replace edits.

An edit names text that must occur exactly once in the candidate; anything else is a one-line error the agent
can act on (the workspace is unchanged).
"""

from __future__ import annotations


class WorkspaceError(ValueError):
    """An edit that cannot apply; its message is shown to the agent."""


class Workspace:
    def __init__(self, code: str) -> None:
        self.code = code
        self.edits = 0

    def write(self, code: str) -> str:
        if not code.strip():
            raise WorkspaceError("the candidate cannot be empty")
        self.code = code
        self.edits += 1
        return f"wrote the candidate ({len(code.splitlines())} lines)"

    def edit(self, search: str, replace: str) -> str:
        if not search:
            raise WorkspaceError("`search` is empty: name the exact text to replace")
        found = self.code.count(search)
        if found == 0:
            raise WorkspaceError("`search` does not occur in the candidate (read_candidate shows it exactly)")
        if found > 1:
            raise WorkspaceError(f"`search` occurs {found} times in the candidate: include more context")
        self.code = self.code.replace(search, replace, 1)
        self.edits += 1
        return "edited the candidate"
