"""Python programs: a module defining the task's entry function, run by the pack's harness in the Python sandbox."""

from coco_sql.languages.python.language import PythonLanguage, PythonRunner
from coco_sql.languages.python.validate import ALLOWED_MODULES, PythonSpec, validate_program

__all__ = ["ALLOWED_MODULES", "PythonLanguage", "PythonRunner", "PythonSpec", "validate_program"]
