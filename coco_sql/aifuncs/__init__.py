"""AI functions for DuckDB, faithful to Snowflake Cortex AISQL: providers, response cache, cost ledger.

Importing this package connects to nothing and loads no model; providers are built on their first call.
"""

from coco_sql.aifuncs.cache import AiCache
from coco_sql.aifuncs.routing import AiConfig, EndpointConfig
from coco_sql.aifuncs.usage import Usage

__all__ = ["AiCache", "AiConfig", "EndpointConfig", "Usage"]
