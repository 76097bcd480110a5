"""Where the files that ship beside the package live: the schema DDL (`sql/`) and the task packs (`tasks/`).

In a source checkout (the usual `pip install -e .`) they sit next to the package; an installed wheel carries copies
under `coco_sql/_data/`. Nothing here reads outside those two places.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """The shipped directory `name` ('sql' or 'tasks'), preferring the source checkout."""
    for candidate in (_PACKAGE.parent / name, _PACKAGE / "_data" / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"coco-sql is installed without its '{name}' directory")
