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


class EvaluationMemoryError(EvaluationError):
    """A candidate needed more memory than its sandbox allows (DuckDB's limit or the worker's kernel limit)."""


class ProviderError(CocoError):
    """An AI provider call failed. `retryable` says whether the same call may succeed if tried again."""

    retryable = False

    def __init__(self, provider: str, message: str) -> None:
        super().__init__(f"AI provider {provider!r}: {message}")
        self.provider = provider


class ProviderRateLimited(ProviderError):
    """HTTP 429 or an equivalent: slow down and retry."""

    retryable = True

    def __init__(self, provider: str, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(provider, message)
        self.retry_after_s = retry_after_s


class ProviderServerError(ProviderError):
    """HTTP 5xx: the endpoint failed this call; retry."""

    retryable = True


class ProviderTimeout(ProviderError):
    """The call did not answer within its per-call timeout; retry while the deadline allows."""

    retryable = True


class ProviderUnavailable(ProviderError):
    """The endpoint cannot be reached at all (connection refused, DNS): a run-level error, not a row error."""


class ProviderResponseError(ProviderError):
    """The endpoint answered, but not with what the protocol promises (malformed JSON, missing fields, 4xx)."""


class CallCancelled(ProviderError):
    """The evaluation's deadline passed or it was cancelled before this call finished."""
