"""scripts/dabstep_reference.py and scripts/dabstep_questions.py as modules, for the tests that use DABStep's
question shapes (scripts/ is not a package: the modules are loaded from their files, as tests/test_scale.py does)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dabstep_questions imports dabstep_reference by name
    spec.loader.exec_module(module)
    return module


ref = _load("dabstep_reference")
shapes = _load("dabstep_questions")
