"""Where untrusted programs and crash-prone native code run: child processes with kernel limits.

- `database`: the DuckDB sandbox (`Sandbox`) every SQL candidate, probe and draft test runs in;
- `lockdown` and `worker`: the locked-down DuckDB inside its worker process;
- `python_sandbox`, `python_worker` and `kernel_layers`: the Python sandbox, a zygote that forks one locked-down
  process per program;
- `confine`: the mount-namespace jail and Landlock, for a worker that must keep opening files (the dbt sandbox,
  `languages.dbt.sandbox`, which also uses `kernel_layers`' seccomp filter in its thread-allowing form);
- `ai_pipe`: AI calls from a worker's SQL, answered by the parent's AI runtime over the worker's pipe;
- `supervisor`: the lifecycle every sandbox shares (start, handshake, replace after a kill).

All are built on `coco_sql.child` (a Python child process speaking checked JSON frames over pipes, `wire` and
`messages`; the local model host uses it too). Imports only `coco_sql.errors`, `coco_sql.child`, `wire`,
`messages` and the AI functions' UDF table: languages and the evaluator build on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coco_sql.sandbox.database import QueryResult, Sandbox, SandboxLimits

__all__ = ["QueryResult", "Sandbox", "SandboxLimits"]


def __getattr__(name: str) -> Any:
    """The DuckDB sandbox's names, imported on first use: a worker started as `python -m
    coco_sql.sandbox.python_worker` runs this file first and must not pay for pandas and DuckDB."""
    if name in __all__:
        from coco_sql.sandbox import database

        return getattr(database, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
