"""Python programs: a module defining the task's entry function, run by the pack's harness in the Python sandbox.
`PLUGIN` is the kind as `coco_sql.plugins` finds it."""

from coco_sql.languages.python.language import PythonLanguage, PythonRunner
from coco_sql.languages.python.plugin import PLUGIN
from coco_sql.languages.python.validate import ALLOWED_MODULES, PythonSpec, validate_program

__all__ = ["ALLOWED_MODULES", "PLUGIN", "PythonLanguage", "PythonRunner", "PythonSpec", "validate_program"]
