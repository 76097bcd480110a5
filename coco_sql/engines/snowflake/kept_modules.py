"""Modules a local-testing procedure or UDF imported stay imported, as they do in a warehouse's Python process.

Snowpark's local testing runs each procedure and UDF call inside its `ImportContext`
(`snowflake.snowpark.mock._util`), which, when the call returns, deletes from `sys.modules` every module the
call imported (its way of giving each call its own IMPORTS). The module objects live on (the handler's functions
still hold them), but the next `import` of one runs it again from scratch:

- a pure-Python module then exists twice: new classes beside the old ones, and its per-process state (a model
  loaded once, a worker template) built again;
- an extension module that refuses a second initialisation fails. numpy's `fft._pocketfft_umath` (imported by
  `scipy.sparse`, which a run imports lazily where it ranks rows) raises "cannot load module more than once per
  process": a second `CALL coco_evolve` in one process failed, and so did a DuckDB run after a local-testing one.

`keeping_imports(handler)` wraps a handler so that what a call imported is remembered, and `KeptModules`, one
finder at the front of `sys.meta_path`, hands the same module object back when it is imported again. A module
loaded from the call's own import directory (a procedure's staged IMPORTS) is not kept: it is the call's own.
An account is not affected: its handlers are registered by `CREATE PROCEDURE`, never through this module.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import os
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any, ParamSpec, TypeVar

_KEPT: dict[str, tuple[ModuleType, importlib.machinery.ModuleSpec | None]] = {}
_LOCK = threading.Lock()
P = ParamSpec("P")
R = TypeVar("R")


class KeptModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds a module a wrapped call imported and the local-testing cleanup removed from `sys.modules`; loads it
    as the module object it was (nothing runs again)."""

    def find_spec(
        self, name: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        kept = _KEPT.get(name)
        if kept is None or name in sys.modules:
            return None
        module, original = kept
        return importlib.machinery.ModuleSpec(
            name,
            self,
            origin=getattr(original, "origin", None),
            is_package=hasattr(module, "__path__"),
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return _KEPT[spec.name][0]

    def exec_module(self, module: ModuleType) -> None:
        """The module ran when it was first imported; only the spec the import system set is put back."""
        original = _KEPT[module.__name__][1]
        if original is not None:
            module.__spec__ = original


_FINDER = KeptModules()


def keeping_imports(handler: Callable[P, R]) -> Callable[P, R]:
    """`handler`, whose imports outlive the local-testing call that made them (module docstring)."""

    @functools.wraps(handler)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        _install()
        before = set(sys.modules)
        try:
            return handler(*args, **kwargs)
        finally:
            _keep(set(sys.modules) - before)

    return call


def kept(name: str) -> bool:
    """Whether module `name` is one a wrapped call imported (for tests)."""
    return name in _KEPT


def _install() -> None:
    with _LOCK:
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)


def _keep(names: set[str]) -> None:
    own = sys._xoptions.get("snowflake_import_directory")  # the call's staged IMPORTS, copied here
    own_prefix = os.path.realpath(own) + os.sep if isinstance(own, str) else None
    with _LOCK:
        for name in names:
            module = sys.modules.get(name)
            if module is None:  # None marks a module as not importable: nothing to keep
                continue
            where = getattr(module, "__file__", None)
            if own_prefix and isinstance(where, str) and os.path.realpath(where).startswith(own_prefix):
                continue
            _KEPT[name] = (module, getattr(module, "__spec__", None))
