"""Finding task packs: by path, or by name on the search paths (./tasks, the repo's tasks/, the wheel's copy;
first match wins), and listing every pack with the error of each broken one. Loading one is `tasks.loader`'s
job."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from coco_sql.errors import TaskError
from coco_sql.tasks.catalog import TASK_FILE, default_search_paths, discover
from coco_sql.tasks.loader import TaskInfo, TaskPack, _load_pack
from coco_sql.tasks.pack_files import display


def _looks_like_path(value: str | Path) -> bool:
    if isinstance(value, Path):
        return True
    return "/" in value or "\\" in value or value.endswith(".toml") or value in (".", "..")


def load_task(
    name_or_path: str | Path, search_paths: Sequence[Path] | None = None, *, registered: bool = False
) -> TaskPack:
    """Load a pack by name (looked up in ``search_paths``) or by path (a pack directory or its task.toml).

    A ``Path``, or a string containing a path separator or ending in ``.toml``, is a path; anything else
    is a name. `registered`: the pack `tasks.from_rows` writes for a task registered from rows.
    """
    if _looks_like_path(name_or_path):
        path = Path(name_or_path)
        root = path.parent if path.name == TASK_FILE or path.suffix == ".toml" else path
        if not (root / TASK_FILE).is_file():
            root = _made_here(root)
        return _load_pack(root, registered=registered)
    paths = list(search_paths) if search_paths is not None else default_search_paths()
    found = discover(paths)
    if name_or_path not in found:
        known = ", ".join(sorted(found)) or "none"
        raise TaskError(f"no task named {str(name_or_path)!r} (known: {known})")
    return _load_pack(found[name_or_path])


MADE = ".coco"  # where `coco-sql init` writes a task made from a project folder: <project>/.coco/<name>/


def _made_here(folder: Path) -> Path:
    """The task `coco-sql init` made from `folder` (``folder/.coco/<name>/task.toml``), found by the folder's path."""
    made = sorted((folder / MADE).glob(f"*/{TASK_FILE}")) if (folder / MADE).is_dir() else []
    if len(made) == 1:
        return made[0].parent
    if len(made) > 1:
        names = ", ".join(p.parent.name for p in made)
        raise TaskError(
            f"{display(folder)}: several tasks were made here ({names}); give the one you mean: "
            f"{display(folder / MADE)}/NAME"
        )
    raise TaskError(
        f"{display(folder)}: no task pack here ({TASK_FILE} not found; a dbt project becomes one with "
        f"`coco-sql init dbt {display(folder)}`)"
    )


def list_tasks(search_paths: Sequence[Path] | None = None) -> list[TaskInfo]:
    """Every pack in ``search_paths``, sorted by name; broken packs carry ``error`` instead of ``pack``."""
    paths = list(search_paths) if search_paths is not None else default_search_paths()
    infos: list[TaskInfo] = []
    for name, root in sorted(discover(paths).items()):
        try:
            infos.append(TaskInfo(name=name, root=root, pack=_load_pack(root)))
        except TaskError as error:
            infos.append(TaskInfo(name=name, root=root, error=str(error)))
    return infos
