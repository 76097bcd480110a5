"""Lazy package exports (PEP 562): a package names what it exports and where each lives, and a name's module is
imported on first use; and `load_target`, the object a plug-in names as "module:attr", imported when asked for. `import coco_sql.engine.spend` then does not load the loop, the mutators and scipy, which
keeps `coco-sql --help` fast (issue 28: under 0.5 s of CPU)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, where: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """(`__getattr__`, `__dir__`) for `package`, whose export `name` lives in module `where[name]` (relative to
    the package, as '.config'). An unknown name is the usual AttributeError."""

    def get(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    def names() -> list[str]:
        return sorted(where)

    return get, names


def load_target(target: str) -> Any:
    """The object "module:attr" names (attr may be dotted; none: the module), imported now. ImportError or
    AttributeError when it is not there (callers say whose target it was, in one line)."""
    module, _, attr = target.partition(":")
    loaded: Any = importlib.import_module(module)
    for name in attr.split(".") if attr else ():
        loaded = getattr(loaded, name)
    return loaded
