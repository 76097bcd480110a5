"""One exception hierarchy, with messages written for the user.

The CLI prints ``str(error)`` as a single line and exits non-zero; tracebacks appear only with ``--debug``.
Every message names what is wrong (the file, the key, the candidate, the provider) and, where it helps, what to do.
"""

from __future__ import annotations


class CocoError(Exception):
    """Base class of every error a user can cause or fix. Its message is one line, shown as is."""


class TaskError(CocoError):
    """A task pack is missing or malformed (task.toml, its data files, its seed program)."""


class ConfigError(CocoError):
    """A command-line option or run configuration is invalid."""


class StoreError(CocoError):
    """The warehouse store cannot be opened, or holds something inconsistent with the request."""


class CandidateRejected(CocoError):
    """A candidate program failed validation. The message is stored as the child's observation."""


class EvaluationError(CocoError):
    """A candidate passed validation but failed while running (runtime error or deadline)."""


class EvaluationTimeout(EvaluationError):
    """A candidate ran past its wall-clock deadline and was interrupted."""
