"""coco-sql in Snowpark's local testing mode: what `coco-sql deploy` sets up on an account, without SQL.

Local testing runs no DDL, so the tables come from `engines.snowflake.sql.create_tables` (the DataFrame API), and
the procedures are the real handlers registered with `session.sproc.register` under the names and argument
types of `signatures.PROCEDURES`, each wrapped so that what a call imports stays imported
(`kept_modules`: local testing forgets it after each call, and a second call failed). The views are not created: local testing reads them through `LocalSql`, which
defines them itself. Tests and local development call `deploy_local` once per session.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.engines.snowflake.procs.signatures import PROCEDURES

if TYPE_CHECKING:
    from snowflake.snowpark import Session


def deploy_local(session: Session) -> None:
    """coco-sql's tables and procedures in a local-testing session."""
    from snowflake.snowpark.types import LongType, StringType, VariantType

    from coco_sql.engines.snowflake.kept_modules import keeping_imports
    from coco_sql.engines.snowflake.procs import handlers
    from coco_sql.engines.snowflake.sql import create_tables
    from coco_sql.engines.snowflake.store import snowpark_schema

    create_tables(session)
    types = {"VARCHAR": StringType(), "NUMBER": LongType(), "VARIANT": VariantType()}
    for name, procedure in PROCEDURES.items():
        session.sproc.register(
            keeping_imports(getattr(handlers, name)),
            name=name,
            input_types=[types[kind] for _, kind, _ in procedure.arguments],
            return_type=snowpark_schema(procedure.columns),
            replace=True,
        )
