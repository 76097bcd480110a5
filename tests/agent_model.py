"""The scripted data agent for the data-agent tests: the package's own (`coco_sql.languages.agent_spec.demo_model`,
which `coco-sql demo-agent-server` serves), run behind `FakeEndpoint` (tests/llm_double.py: a real local HTTP
server speaking the OpenAI wire format, `full_tools=True`), so coco_sql's real OpenAI-compatible client, the AI
runtime and its cache carry every turn."""

from coco_sql.languages.agent_spec.demo_model import GIVE_UP, RULES, DataAgentModel, knowledge, rules_in

__all__ = ["GIVE_UP", "RULES", "DataAgentModel", "knowledge", "rules_in"]
