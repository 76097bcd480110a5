"""What `coco-sql deploy` and `coco-sql mirror` do on Snowflake: the engine's `commands` part
(`EnginePlugin.warehouse_commands`), which `cli_warehouse` reaches through the registry. The command line's
parsing and printing stay in `cli_warehouse`; the work is `deploy` (the script, the package zip, the deploy on a
connection, a long run as a Snowflake TASK) and `mirror` (a run of a connection's store copied into a store file).
Each import is made when its command runs: loading the part loads neither Snowpark nor the stores."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from coco_sql.engines.duckdb.store import DuckDBStore
    from coco_sql.engines.snowflake.procs.deploy import DeployPlan, TaskRun
    from coco_sql.engines.snowflake.procs.mirror import Mirrored
    from coco_sql.engines.snowflake.store import SnowparkStore
    from coco_sql.progress import Progress


class WarehouseCommands:
    """Snowflake's deploy and mirror, as the warehouse commands of the CLI call them."""

    def task_run(self, task: str, budget: int, warehouse: str, options: dict[str, Any] | None) -> TaskRun:
        """A long coco_evolve run to start as a Snowflake TASK on `warehouse` (`deploy --task-run`)."""
        from coco_sql.engines.snowflake.procs.deploy import TaskRun

        return TaskRun(task, budget, warehouse, options)

    def deploy_script(self, **options: Any) -> str:
        """The deploy script as text (`deploy.deploy_script`), its names checked first."""
        from coco_sql.engines.snowflake.procs.deploy import deploy_script

        return deploy_script(**options)

    def build_package_zip(self, path: str | Path) -> Path:
        """The package zip the procedures import, written to `path`."""
        from coco_sql.engines.snowflake.procs.deploy import build_package_zip

        return build_package_zip(path)

    def deploy(self, connection: str, *, progress: Progress | None = None, **options: Any) -> DeployPlan:
        """The deploy run on the connection `connection` of connections.toml (`deploy.deploy`)."""
        from coco_sql.engines.snowflake.procs.deploy import deploy

        return deploy(connection, progress=progress, **options)

    @contextlib.contextmanager
    def store(self, connection: str, command: str) -> Iterator[SnowparkStore]:
        """The store of the connection `connection`, read-only, its session closed after; Snowflake's errors
        raised inside as one-line StoreErrors, and ConfigError naming `command` when Snowpark is missing."""
        from coco_sql.engines.snowflake.procs.connection import open_session, snowflake_errors
        from coco_sql.engines.snowflake.store import SnowparkStore

        session = open_session(connection, command)
        try:
            with snowflake_errors():
                yield SnowparkStore(session, read_only=True)
        finally:
            session.close()

    def mirror(
        self, source: SnowparkStore, target: DuckDBStore, run_id: int, progress: Progress | None = None
    ) -> Mirrored:
        """Run `run_id` of `source` copied into `target` (`mirror.mirror_run`)."""
        from coco_sql.engines.snowflake.procs.mirror import mirror_run

        return mirror_run(source, target, run_id, progress)


COMMANDS = WarehouseCommands()

__all__ = ["COMMANDS", "WarehouseCommands"]
