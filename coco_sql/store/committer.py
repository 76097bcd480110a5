"""Write-behind commits: iteration t's transaction runs while iteration t+1 is being mutated.

At most one batch is in flight, and batches commit in submission order, so the tables always hold a prefix of the
run's iterations: a crash loses at most the iterations not yet committed, and resume recomputes them exactly (the
loop's RNG streams are per iteration). A failed commit is re-raised in the caller's thread at the next `submit`
or at `flush`; nothing after it is written.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from coco_sql.store.base import Warehouse
from coco_sql.store.records import IterationBatch


class Committer:
    """Write-behind over a store that allows writes from a second thread (`Warehouse.write_behind`); commits in
    the caller's thread otherwise (a Snowpark session inside a stored procedure is held by the calling thread)."""

    def __init__(self, store: Warehouse) -> None:
        self._store = store
        self._pool = (
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="coco-commit")
            if store.write_behind
            else None
        )
        self._pending: Future[None] | None = None

    def submit(self, batch: IterationBatch, on_commit: Callable[[], None] | None = None) -> None:
        """Queue `batch` behind the previous one (waiting for that one first); call `on_commit` once it is durable."""
        self.flush()

        def commit() -> None:
            self._store.write_iteration(batch)
            if on_commit is not None:
                on_commit()

        if self._pool is None:
            commit()
        else:
            self._pending = self._pool.submit(commit)

    def flush(self) -> None:
        """Wait for the batch in flight; re-raise its error, if any."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
