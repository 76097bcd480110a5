"""Running a spec on one question: our own tool-calling loop over any chat model the `llm` layer routes.

Each model call is one `AiRuntime.complete` inside `AiRuntime.evaluation`, as the coding agent's
`agent.conversation.Conversation.ask` makes it (that class is not imported: `languages` may not import `agent`,
tests/test_architecture.py). The runtime's response cache keys the whole request (model, parameters, the tools
offered, every message), so the same spec, question and model give the same requests, a rerun is answered from the
cache without an HTTP request, and a resumed run replays exactly. Temperature is 0 and nothing else varies: the seed of a run enters
through what it chooses (which spec, which questions), not through the requests.

One run: the system prompt (the spec, `prompt.system_prompt`) and the question; then, until the model answers
without calling a tool, each call is executed by the `ToolBox` (in the SQL sandbox or the warehouse, over the task's tables) and its
bounded result returned as the tool turn. Budgets: model turns, prompt + completion tokens and wall seconds, each
the smaller of the task's limit (`RunLimits`) and the spec's ``orchestration.budget``; a spent budget ends the run
without an answer (``stop`` says which). A dead endpoint (`ProviderUnavailable`) is not the spec's fault and is
raised, so the run stops and resumes later from the cache.

In Snowflake (the kind bound to the store's `CandidateEngine`: `warehouse`), the same loop runs inside the
procedure with ``cortex:<model>``: each turn one ``SNOWFLAKE.CORTEX.COMPLETE`` through the session, the tools in
the prompted protocol of `tool_wire` (COMPLETE's documented options carry no tools), each call executed as a
warehouse query; the cache keys the same whole requests. The Cortex Agents run API (its SQL wrappers
SNOWFLAKE.CORTEX.DATA_AGENT_RUN and AGENT_RUN) would run Snowflake's orchestration and tools instead of ours, with
no request of ours to cache and replay, so it is for checking an exported agent (`export.py`), not for the search.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from coco_sql.errors import ProviderError, ProviderUnavailable
from coco_sql.languages.agent_spec import trace as traces
from coco_sql.languages.agent_spec.prompt import system_prompt, user_prompt
from coco_sql.languages.agent_spec.spec import AgentSpec
from coco_sql.languages.agent_spec.tools import ToolBox
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Deadline, Message
from coco_sql.llm.runtime import AiRuntime

AGENT_FUNCTION = "data_agent"  # how the cache keys and the usage ledger name these calls


@dataclass(frozen=True)
class RunLimits:
    """The task's ceiling on one question's run; a spec's budget may only lower seconds and tokens."""

    max_turns: int = 10
    max_tokens: int = 60_000
    seconds: float = 180.0
    max_output_tokens: int = 1_024


@dataclass(frozen=True)
class Budget:
    """One run's budget: model calls, prompt + completion tokens, wall seconds."""

    max_turns: int
    max_tokens: int
    seconds: float


@dataclass(frozen=True)
class AgentRun:
    answer: str | None
    trace: dict[str, Any]


def budget(spec: AgentSpec, limits: RunLimits) -> Budget:
    tokens = min(limits.max_tokens, spec.budget_tokens or limits.max_tokens)
    seconds = min(limits.seconds, float(spec.budget_seconds or limits.seconds))
    return Budget(max_turns=limits.max_turns, max_tokens=tokens, seconds=seconds)


@dataclass
class _Chat:
    """The conversation so far and what it spent."""

    model: str
    budget: Budget
    max_output_tokens: int
    messages: list[Message] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    turns: int = 0
    tokens: int = 0

    def remaining_s(self) -> float:
        return self.budget.seconds - (time.monotonic() - self.started)

    def spent(self) -> str | None:
        """Which budget is spent before the next model call, or None."""
        b = self.budget
        if self.turns >= b.max_turns:
            return f"budget: {b.max_turns} model turns without a final answer"
        if self.tokens >= b.max_tokens:
            return f"budget: {b.max_tokens:,} tokens spent without a final answer"
        if self.remaining_s() <= 0:
            return f"budget: {b.seconds:g} s passed without a final answer"
        return None

    def ask(
        self, runtime: AiRuntime, request: CompletionRequest, *, inside: bool = False
    ) -> CompletionResult | ProviderError:
        """One model call, bounded by what is left of the seconds (`inside` an evaluation the caller opened: by
        that evaluation's deadline, which accounts the call); a dead endpoint is raised."""
        if inside:
            (answer,) = runtime.complete(AGENT_FUNCTION, [request])
        else:
            with runtime.evaluation(Deadline.after(self.remaining_s())):
                (answer,) = runtime.complete(AGENT_FUNCTION, [request])
        self.turns += 1
        if isinstance(answer, ProviderUnavailable):
            raise answer
        if isinstance(answer, CompletionResult):
            self.tokens += answer.input_tokens + answer.output_tokens
            self.messages.append(answer.as_message())
        return answer


def run_question(
    spec: AgentSpec, question_id: str, question: str, guidelines: str,
    *, runtime: AiRuntime, toolbox: ToolBox, model: str, limits: RunLimits | None = None, inside: bool = False,
) -> AgentRun:  # fmt: skip
    """Run `spec` on one question (never given its expected answer) and return the answer and the trace.
    `inside`: the caller has opened the runtime's evaluation (the evaluator's, which accounts every call and
    bounds it by the split's deadline; the runtime's evaluations do not nest)."""
    limits = limits or RunLimits()
    system = system_prompt(spec, toolbox.schemas, toolbox.dialect)
    user = user_prompt(question, guidelines)
    trace = traces.new_trace(question_id, model, system, user)
    chat = _Chat(model, budget(spec, limits), limits.max_output_tokens)
    chat.messages += [Message("system", system), Message("user", user)]
    tools = toolbox.chat_tools
    while True:
        stop = chat.spent()
        if stop is not None:
            trace["stop"] = stop
            break
        request = CompletionRequest(model, tuple(chat.messages), temperature=0.0, max_tokens=chat.max_output_tokens,
                                    tools=tools, tool_choice="auto" if tools else None)  # fmt: skip
        answer = chat.ask(runtime, request, inside=inside)
        if isinstance(answer, ProviderError):
            trace["stop"] = f"stopped: the model call failed: {' '.join(str(answer).split())[:300]}"
            break
        usage = trace["usage"]
        usage["turns"] += 1
        usage["input_tokens"] += answer.input_tokens
        usage["output_tokens"] += answer.output_tokens
        calls = [{"id": c.id, "name": c.name, "arguments": c.arguments if c.arguments is not None else c.raw_arguments}
                 for c in answer.tool_calls]  # fmt: skip
        traces.add_assistant(trace, answer.text, calls)
        if not answer.tool_calls:
            trace["answer"], trace["stop"] = answer.text.strip(), "answer"
            break
        for call in answer.tool_calls:
            outcome = toolbox.call(call, seconds_left=chat.remaining_s())
            chat.messages.append(Message("tool", outcome.text, tool_call_id=call.id))
            traces.add_step(trace, call.id, outcome.step())
    trace = traces.bounded(trace)
    return AgentRun(trace["answer"], trace)
