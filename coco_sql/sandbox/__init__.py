"""Where untrusted programs and crash-prone native code run: child processes with kernel limits.

- `database`: the DuckDB sandbox (`Sandbox`) every SQL candidate, probe and draft test runs in;
- `lockdown` and `worker`: the locked-down DuckDB inside its worker process.

Both are built on `coco_sql.child` (a Python child process speaking over pipes; the local model host uses it
too). Imports only `coco_sql.errors`, `coco_sql.child` and the AI functions' UDF table: languages and the
evaluator build on it.
"""

from coco_sql.sandbox.database import QueryResult, Sandbox, SandboxLimits

__all__ = ["QueryResult", "Sandbox", "SandboxLimits"]
