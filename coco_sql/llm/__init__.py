"""The model layer shared by the AI functions and every mutator: chat (with tool definitions and tool calls, in
the OpenAI and Anthropic wire formats) and embeddings through providers, the call pool (limits, retries,
deadlines), the response and embedding cache, and usage records for the cost ledger.

Importing this package connects to nothing and loads no model; providers are built on their first call, and
the exports below load on first use (`coco_sql.lazy`).
"""

from coco_sql.lazy import lazy_exports

_WHERE = {"AiCache": ".cache", "AiConfig": ".routing", "EndpointConfig": ".routing", "Usage": ".usage"}
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
__all__ = sorted(_WHERE)
