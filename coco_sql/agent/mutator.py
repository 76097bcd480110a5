"""The coding-agent mutator (CoCoEvolve Section 2, Appendices C-E): a multi-turn tool-calling conversation with
a chat model that investigates, edits the candidate, tests it on training rows and commits one child.

Any chat model the `llm` layer routes serves it: an OpenAI-compatible or Anthropic endpoint (`openai/gpt-4o-mini`,
`anthropic/claude-3-5-haiku-latest`, `local/<model>` for llama.cpp's server, vLLM, Ollama), or Cortex COMPLETE
inside Snowflake (`cortex:<model>`). Calls go through the run's model runtime (`MutationRequest.models`), whose
response cache is keyed by the whole request (messages, tool calls, tools offered): a resumed run replays a
mutation's turns from the cache without new calls, so with a deterministic model resume equals an uninterrupted
run.

Modes (the paper's D.2 ablation): `static` one-shot (no tools: the model answers with a program), `agentic`
(tools, no self-test) and `self_test` (tools and `test_draft`, the default). `ledger` and `history` switch the
strategy ledger in the prompt and the history tools (D.3). `tool_choice = "forced"` serves models that only call
a tool when the request names it (SmolLM2 through llama.cpp's server): each turn names the next tool of a fixed
investigate-edit-test-commit schedule.

Every way a conversation can go wrong ends in a discarded child whose `discarded` reason is recorded, never in a
crash: no tool call, unknown tools or bad arguments, three invalid candidates, a turn/token/time budget, a
failed or too-long model call. A dead endpoint (`ProviderUnavailable`) is the exception: the run stops with its
one line, and resumes later from the cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from coco_sql.agent.conversation import Budget, Conversation, Discard
from coco_sql.agent.prompts import render
from coco_sql.agent.strategy import Direction, Proposer, Reflector
from coco_sql.agent.toolbox import Toolbox
from coco_sql.agent.workspace import Workspace
from coco_sql.errors import ConfigError
from coco_sql.llm.providers.base import CompletionResult, Message
from coco_sql.mutate.base import MutationRequest, Mutator, Proposal
from coco_sql.options import AGENT_SETTINGS
from coco_sql.plugins import kind


@dataclass(frozen=True)
class AgentSettings:
    """The agent's settings (`--mutator agent --mutator-setting name=value`); see the module docstring."""

    model: str = ""
    mode: str = "self_test"
    prompt: str = "static_task"  # the one-shot prompt (mode static)
    ledger: bool = True
    history: bool = True
    offline_tools: bool = True
    max_turns: int = 16
    max_tokens: int = 60_000  # prompt + completion tokens per mutation
    wall_s: float = 300.0
    max_tests: int = 3
    test_rows: int = 10
    max_invalid: int = 3
    max_tool_errors: int = 5  # consecutive
    max_silent_turns: int = 2  # answers without a tool call before the mutation is discarded
    tool_choice: str = "auto"
    temperature: float = 0.0
    max_output_tokens: int = 1024
    # Appendix E: a reflector (keep / new / none from the ledger) and a proposer (new strategies as JSON ideas),
    # each on its own model; "" switches the reflector off, and the proposer defaults to the reflector's model.
    reflector_model: str = ""
    proposer_model: str = ""

    def __post_init__(self) -> None:
        for option in AGENT_SETTINGS:  # type and range (`coco_sql.options`), the budgets' bounds included
            option.check(getattr(self, option.name), label=f"agent setting {option.name!r}")
        if not self.model:
            raise ConfigError("the agent mutator needs a model: --model <endpoint>/<model> (in SQL: mutator_settings.model) "
                              "(e.g. openai/gpt-4o-mini, anthropic/claude-3-5-haiku-latest, cortex:mistral-large2)")  # fmt: skip
        if self.reflector_model and not self.ledger:
            raise ConfigError("the reflector reads the strategy ledger: it needs ledger=true")
        if self.proposer_model and not self.reflector_model:
            raise ConfigError(
                "the proposer runs when the reflector asks for a new strategy: set reflector_model too"
            )

    @property
    def budget(self) -> Budget:
        return Budget(self.max_turns, self.max_tokens, self.wall_s)


class AgentMutator:
    """`Mutator` over a chat model (module docstring). `offline` is the language's offline mutator, offered as
    the `offline_search` tool."""

    name = "agent"
    uses_models = True

    def __init__(
        self, settings: AgentSettings, offline: Mutator | None = None, *, agent: str = "agent"
    ) -> None:
        self.settings = settings
        self.offline = offline if settings.offline_tools else None
        self.agent = agent
        self.reflector = (
            Reflector(settings.reflector_model, Proposer(settings.proposer_model or settings.reflector_model))
            if settings.reflector_model
            else None
        )

    def propose(self, request: MutationRequest, rng: np.random.Generator) -> Proposal:
        if request.models is None:
            raise ConfigError("the agent mutator needs the run's model runtime (MutationRequest.models)")
        s = self.settings
        direction, advisors = self._direction(request)
        chat = Conversation(self.agent, s.model, s.budget, s.temperature, s.max_output_tokens)
        try:
            if s.mode == "static":
                proposal = self._one_shot(request, chat, direction)
            else:
                proposal = self._agentic(request, chat, rng, direction)
        except Discard as reason:
            proposal = Proposal(
                code=request.parent.code,
                approach=f"discarded: {reason}",
                notes={"discarded": str(reason), "turns": chat.turns, "tokens": chat.tokens},
                discarded=str(reason),
            )
        return self._with_records(proposal, [*advisors, chat], direction)

    def _direction(self, request: MutationRequest) -> tuple[Direction | None, list[Conversation]]:
        """The reflector's decision for this mutation (None when it is off) and its conversations."""
        if self.reflector is None:
            return None, []
        return self.reflector.decide(
            request.models, request.context.ledger, request.iteration, request.parent.score
        )

    @staticmethod
    def _with_records(proposal: Proposal, chats: list[Conversation], direction: Direction | None) -> Proposal:
        """`proposal` with every role's transcript and spending, and the reflector's direction."""
        usage = chats[-1].usage
        for chat in chats[:-1]:
            usage.merge(chat.usage)
        notes = dict(proposal.notes)
        paradigm = None
        strategy = proposal.strategy
        if direction is not None:
            notes["reflector"] = {"decision": direction.decision, "strategy": direction.strategy,
                                  "reason": direction.reason}  # fmt: skip
            if direction.strategy is not None and proposal.discarded is None:
                notes["declared"] = proposal.strategy
                strategy, paradigm = direction.strategy, direction.paradigm
        transcript = tuple(turn for chat in chats for turn in chat.transcript)
        return replace(proposal, strategy=strategy, paradigm=paradigm, notes=notes, usage=usage,
                       transcript=transcript)  # fmt: skip

    # -- the two shapes of a mutation ----------------------------------------------------------------------------
    def _agentic(
        self,
        request: MutationRequest,
        chat: Conversation,
        rng: np.random.Generator,
        direction: Direction | None,
    ) -> Proposal:
        s = self.settings
        plugin = kind(request.env.task.language)
        toolbox = Toolbox(
            request, Workspace(request.parent.code, plugin.file_marker), rng,
            history=request.history if s.history else None, offline=self.offline,
            self_test=s.mode == "self_test", max_tests=s.max_tests, test_rows=s.test_rows,
            row_traces=plugin.row_traces,
        )  # fmt: skip
        system = render("agent_system", **self._task_context(request, toolbox))
        chat.add(Message("system", system.text), template=system.ref)
        task = render("agent_task", **self._parent_context(request, direction))
        chat.add(Message("user", task.text), template=task.ref)
        silent = errors = 0
        schedule = _forced_schedule(toolbox) if s.tool_choice == "forced" else None
        while True:
            choice = schedule[min(chat.turns, len(schedule) - 1)] if schedule else s.tool_choice
            answer = self._turn(request, chat, toolbox, choice)
            if not answer.tool_calls:
                silent += 1
                if silent >= s.max_silent_turns:
                    raise Discard(f"the model answered {silent} times without calling a tool")
                nudge = render("agent_nudge")
                chat.add(Message("user", nudge.text), template=nudge.ref)
                continue
            silent = 0
            for call in answer.tool_calls:
                result = toolbox.call(call)
                chat.add(Message("tool", result.text, tool_call_id=call.id), tool_name=call.name)
                if result.commit is not None:
                    c = result.commit
                    return Proposal(
                        code=c.code,
                        approach=c.description,
                        strategy="hillclimb" if c.approach == "hillclimb" else (c.direction or "new"),
                        notes={"turns": chat.turns, "tokens": chat.tokens, "tests": toolbox.tests_used,
                               "edits": toolbox.workspace.edits},
                    )  # fmt: skip
                errors = errors + 1 if result.error else 0
                if toolbox.invalid_candidates >= s.max_invalid:
                    raise Discard(
                        f"the candidate was invalid {toolbox.invalid_candidates} times: {result.text[:200]}"
                    )
                if errors >= s.max_tool_errors:
                    raise Discard(f"{errors} tool calls in a row failed; the last: {result.text[:200]}")

    def _one_shot(
        self, request: MutationRequest, chat: Conversation, direction: Direction | None
    ) -> Proposal:
        prompt = render(self.settings.prompt, **self._parent_context(request, direction))
        system = render("agent_system", **self._task_context(request, None))
        chat.add(Message("system", system.text), template=system.ref)
        chat.add(Message("user", prompt.text), template=prompt.ref)
        answer = self._turn(request, chat, None, None)
        code = _fenced(answer.text)
        if code is None:
            raise Discard("the model's answer has no ``` fenced program")
        approach = next((line.split(":", 1)[1].strip() for line in answer.text.splitlines()
                         if line.lower().startswith("approach:")), "one-shot rewrite")  # fmt: skip
        return Proposal(code, approach or "one-shot rewrite", notes={"turns": 1, "tokens": chat.tokens})

    # -- one model call ------------------------------------------------------------------------------------------
    def _turn(
        self, request: MutationRequest, chat: Conversation, toolbox: Toolbox | None, choice: str | None
    ) -> CompletionResult:
        return chat.ask(
            request.models, tools=toolbox.specs if toolbox is not None else (), tool_choice=choice
        )

    # -- prompt context ------------------------------------------------------------------------------------------
    def _task_context(self, request: MutationRequest, toolbox: Toolbox | None) -> dict[str, Any]:
        env = request.env
        task = env.task
        return {
            "language": task.language,
            "program": kind(task.language).program_prompt(task),
            "dialect": env.dialect,
            "description": task.description,
            "input_columns": ", ".join(f"{name} {kind}" for name, kind in task.input_columns.items()),
            "output_column": env.output_column,
            "output_type": env.output_type,
            "allowed_functions": ", ".join(sorted(env.allowed_functions)),
            "history": toolbox is not None and toolbox.history is not None,
            "self_test": toolbox is not None and toolbox.self_test,
            "offline_search": toolbox is not None and toolbox.offline is not None,
            "max_tests": self.settings.max_tests,
        }

    def _parent_context(self, request: MutationRequest, direction: Direction | None) -> dict[str, Any]:
        context = request.context
        return {
            "iteration": request.iteration,
            "parent_id": request.parent.program_id,
            "parent_score": request.parent.score,
            "parent_code": request.parent.code,
            "ledger": list(context.ledger[-12:]) if self.settings.ledger else [],
            "paradigm": (direction.paradigm if direction is not None else context.paradigm)
            if self.settings.ledger
            else None,
            "targets": list(context.targets),
            "tried": sorted(context.tried),
            "observation": _observation(context.target_observation),
            "inspirations": list(request.others[:3]),
            "operator": request.operator.text if request.operator is not None else None,
        }


def _observation(observation: Any) -> str | None:
    if not observation:
        return None
    return "\n".join(f"- {key}: {value}" for key, value in dict(observation).items())


def _forced_schedule(toolbox: Toolbox) -> list[str]:
    """The tool each turn names when the model needs `tool_choice` to name one: investigate, write, test,
    commit (the last entry repeats)."""
    names = {spec.name for spec in toolbox.specs}
    first = "get_hard_questions" if "get_hard_questions" in names else "show_draft"
    middle = ["test_draft"] if "test_draft" in names else ["check"]
    return [first, "write_candidate", *middle, "commit"]


_FENCE = re.compile(r"```[a-zA-Z0-9_]*\n(.*?)```", re.DOTALL)


def _fenced(text: str) -> str | None:
    blocks = [b.strip() for b in _FENCE.findall(text) if b.strip()]
    return blocks[-1] if blocks else None
