"""Static validation of untrusted candidate SQL programs (see :mod:`coco_sql.sqlcheck.validator`)."""

from coco_sql.sqlcheck.validator import ValidatedProgram, ValidationSpec, parse_program, validate_candidate

__all__ = ["ValidatedProgram", "ValidationSpec", "parse_program", "validate_candidate"]
