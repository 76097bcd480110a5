"""Before a data-agent run spends its time: can the model call a tool at all? One smoke question says.

A data agent answers by calling its tools; a model that never calls one scores nothing, however long the run
(issue 40: SmolLM2-135M ran 23 minutes and ended 0.000 -> 0.000). So before the first question, the model gets
one request with one tool and a question that asks for exactly that call. A reply without a tool call stops the
run with one line that says so and what to configure instead. The tool is never run: the check reads the reply.

The request goes through the runtime like every other (its response cache, its endpoint, and the usage of the
evaluation it runs in: the first evaluation of a run's first split), so a resumed run or a second evaluation
replays the answer without a call; its answer is at most `SMOKE_TOKENS` long.
"""

from __future__ import annotations

from coco_sql.errors import ConfigError, ProviderError, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Deadline, Message, ToolSpec
from coco_sql.llm.runtime import AiRuntime

SMOKE_SECONDS = 60.0
SMOKE_TOKENS = 64
SMOKE_SQL = "SELECT 6 * 7 AS answer"
SMOKE_TOOL = ToolSpec(
    "run_sql",
    "Run one read-only SQL query and return its rows.",
    {
        "type": "object",
        "properties": {"sql": {"type": "string", "description": "the query"}},
        "required": ["sql"],
    },
)
SMOKE_SYSTEM = (
    "You are a data agent. You answer questions by calling your tools; call a tool before you answer."
)
SMOKE_QUESTION = (
    f"What is 6 times 7? Call the tool run_sql with the query {SMOKE_SQL}, then answer with its result."
)
SMOKE_FUNCTION = "data_agent_smoke"  # how the cache and the usage name this call
INSTEAD = (
    "a data agent needs a model that calls tools: name one with --completion-model (openai/<model> with "
    "OPENAI_BASE_URL and OPENAI_API_KEY, anthropic/<model>, cortex:<model> in Snowflake), or try the kind offline "
    "with the scripted demo model (coco-sql demo-agent-server)"
)


def check_tool_calling(runtime: AiRuntime, model: str, *, inside: bool = False) -> None:
    """A one-line ConfigError when `model` answers the smoke question without calling the tool. `inside`: the
    caller has opened the runtime's evaluation (which then accounts the call and bounds it by its deadline)."""
    request = CompletionRequest(
        model,
        (Message("system", SMOKE_SYSTEM), Message("user", SMOKE_QUESTION)),
        temperature=0.0,
        max_tokens=SMOKE_TOKENS,
        tools=(SMOKE_TOOL,),
        tool_choice="auto",
    )
    if inside:
        (answer,) = runtime.complete(SMOKE_FUNCTION, [request])
    else:
        with runtime.evaluation(Deadline.after(SMOKE_SECONDS)):
            (answer,) = runtime.complete(SMOKE_FUNCTION, [request])
    if isinstance(answer, ProviderUnavailable):
        raise answer
    if isinstance(answer, ProviderError):
        raise ConfigError(
            f"model {model!r} failed the smoke question ({' '.join(str(answer).split())[:200]}); {INSTEAD}"
        )
    assert isinstance(answer, CompletionResult)
    if not answer.tool_calls:
        said = " ".join(answer.text.split())[:80]
        raise ConfigError(f"model {model!r} answered a smoke question without calling the tool it was asked to call "
                          f"({said!r}): {INSTEAD}")  # fmt: skip
