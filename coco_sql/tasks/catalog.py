"""Where task packs are, and what `coco-sql tasks` lists, without loading one: a pack is a directory with a
task.toml, looked up on the search paths (./tasks, the repo's tasks/, the wheel's copy; first match wins).
Listing reads each task.toml's name and description only (tomllib), so it takes no pandas, DuckDB or sqlglot
(issue 28: `coco-sql tasks` under 0.5 s of CPU); a pack whose task.toml does not parse is listed as broken, and
everything else about a pack is checked when it is loaded (`tasks.lookup.load_task`, `list_tasks`)."""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path

TASK_FILE = "task.toml"


def default_search_paths() -> list[Path]:
    """Where packs are looked up, first match wins: ./tasks, the repo's tasks/, then the wheel's copy."""
    here = Path(__file__).resolve()
    candidates = [Path.cwd() / "tasks", here.parents[2] / "tasks", here.parents[1] / "_data" / "tasks"]
    paths: list[Path] = []
    for candidate in candidates:
        if candidate.resolve() not in [p.resolve() for p in paths]:
            paths.append(candidate)
    return paths


def discover(search_paths: Sequence[Path]) -> dict[str, Path]:
    """Pack name -> directory, earlier search paths shadowing later ones."""
    found: dict[str, Path] = {}
    for base in search_paths:
        if not base.is_dir():
            continue
        for child in sorted(base.iterdir()):
            if (child / TASK_FILE).is_file() and child.name not in found:
                found[child.name] = child
    return found


def summaries(search_paths: Sequence[Path] | None = None) -> list[tuple[str, str]]:
    """(name, one-line description) of every pack, sorted by name; '(broken: ...)' for a task.toml that does
    not parse or has no description line."""
    paths = list(search_paths) if search_paths is not None else default_search_paths()
    listed = []
    for name, root in sorted(discover(paths).items()):
        try:
            doc = tomllib.loads((root / TASK_FILE).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            listed.append((name, f"(broken: {TASK_FILE} does not parse: {str(error).splitlines()[0]})"))
            continue
        description = doc.get("description")
        if not isinstance(description, str) or not description.strip() or "\n" in description.strip():
            listed.append((name, f"(broken: {TASK_FILE} has no one-line description)"))
        else:
            listed.append((name, description.strip()))
    return listed
