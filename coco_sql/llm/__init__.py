"""The model layer shared by the AI functions and every mutator: chat (with tool definitions and tool calls, in
the OpenAI and Anthropic wire formats) and embeddings through providers, the call pool (limits, retries,
deadlines), the response and embedding cache, and usage records for the cost ledger.

Importing this package connects to nothing and loads no model; providers are built on their first call.
"""

from coco_sql.llm.cache import AiCache
from coco_sql.llm.routing import AiConfig, EndpointConfig
from coco_sql.llm.usage import Usage

__all__ = ["AiCache", "AiConfig", "EndpointConfig", "Usage"]
