"""Where the files that ship beside the package live: the schema DDL (`sql/`), the task packs (`tasks/`) and the
deploy kit (`stored_procs/`: generated from the package, so nothing here needs it).

Three layouts, found through `importlib.resources` so that none of them needs a real directory:

    source checkout   sql/ next to the package (the usual `pip install -e .`)
    wheel             coco_sql/_data/sql, copied in by the build
    zip               coco_sql/_data/sql inside coco_sql.zip, imported by zipimport (Snowflake's IMPORTS,
                      `engines.snowflake.procs.deploy.build_package_zip`); task packs are not shipped there

A directory is returned as a `Traversable`: a `Path` on disk, a `zipfile.Path` inside a zip. Both support `/`,
`is_dir`, `iterdir` and `read_text`. Nothing here reads outside those places.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path


def resource_dir(name: str) -> Traversable:
    """The shipped directory `name` ('sql', 'tasks' or 'stored_procs'), preferring the source checkout."""
    for candidate in _candidates(name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"coco-sql is installed without its '{name}' directory")


def read_resource(directory: str, filename: str) -> str:
    """The text of the shipped file `directory/filename` (UTF-8), wherever the package was imported from."""
    return (resource_dir(directory) / filename).read_text(encoding="utf-8")


def _candidates(name: str) -> list[Traversable]:
    package = files("coco_sql")
    shipped = package / "_data" / name
    if isinstance(package, Path):  # on disk: a source checkout keeps sql/ beside the package
        return [package.parent / name, shipped]
    return [shipped]
