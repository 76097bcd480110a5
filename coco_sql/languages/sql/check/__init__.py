"""Static validation of untrusted candidate SQL programs (see :mod:`coco_sql.languages.sql.check.validator`)."""

from coco_sql.languages.sql.check.validator import (
    ValidatedProgram,
    ValidationSpec,
    parse_program,
    validate_candidate,
)

__all__ = ["ValidatedProgram", "ValidationSpec", "parse_program", "validate_candidate"]
