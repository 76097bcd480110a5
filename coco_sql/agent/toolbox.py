"""The agent's tools, each with a JSON schema, and their dispatch.

    history     the paper's Table 6 (`reflect.history.HistoryTools`): programs, lineages, per-row solvers, the
                thinking traces of earlier iterations (training rows only, validation as aggregates); and, for
                a kind whose runs leave a trace per row (`KindPlugin.row_traces`: a data agent's messages, tool
                calls, SQL and results), `get_row_trace`. Offered to those kinds only: a tool more in the list
                changes every request the agent sends, so the cached agent runs of the other kinds stay valid
    data        query (read-only SQL over the training rows), check, show_draft
    workspace   read_candidate, write_candidate, edit_candidate
    test_draft  the candidate on training rows: the train score and at most `test_rows` rows (failures first),
                at most `max_tests` times per mutation (together with show_draft: the budget below)
    primitives  check_primitives: the candidate against this iteration's PACE operator contract (only when
                primitives are on; the operator itself is in the task prompt)
    offline     offline_search: the offline operators (guard screening, joint rule fit, leaf changes) run from
                the parent, returned as a proposal the agent may adopt
    commit      ends the mutation with the workspace's candidate, an approach (hillclimb | new) and a line

The draft-test budget: every call that runs the candidate on the training rows, `test_draft` or `show_draft`,
spends one of the mutation's `max_tests` draft tests. `show_draft` of a candidate this mutation has already
tested spends none (it shows that test's rows again, nothing runs), and once the budget is spent `show_draft` of
an untested candidate is refused like a fourth `test_draft`: the budget bounds what the agent learns from
training labels, and a tool that ran a full test for free would lift it.

A tool's answer is JSON text (or a one-line error the agent can act on). A tool that fails in a way that is not
the agent's mistake (its SQL fails inside DuckDB, say) ends the mutation: the child is discarded with the reason,
so a resumed run that replays the same cached turn discards it again instead of crashing again. Nothing here can
reach validation or test rows: the data tools are bound to the training sandbox, and the history tools answer an
id that is not a training row with the same refusal as an unknown id.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from coco_sql.agent.conversation import Discard
from coco_sql.agent.workspace import Workspace, WorkspaceError
from coco_sql.errors import CocoError
from coco_sql.llm.providers.base import ToolCall, ToolSpec
from coco_sql.mutate.base import MutationRequest, Mutator
from coco_sql.reflect.history import HistoryTools

MAX_RESULT_CHARS = (
    6000  # a tool answer longer than this is cut (the agent is told), to keep the context small
)


@dataclass
class Commit:
    code: str
    approach: str  # hillclimb | new
    description: str
    direction: str | None = None


@dataclass
class ToolAnswer:
    text: str
    error: bool = False
    commit: Commit | None = None


@dataclass
class Toolbox:
    """The tools of one mutation, over its request (parent, environment, history) and workspace."""

    request: MutationRequest
    workspace: Workspace
    rng: np.random.Generator
    history: HistoryTools | None = None
    offline: Mutator | None = None
    self_test: bool = True
    max_tests: int = 3
    test_rows: int = 10
    tests_used: int = 0
    invalid_candidates: int = 0
    row_traces: bool = False  # offer `get_row_trace` (with the history tools): the kind's runs leave traces
    _specs: dict[str, ToolSpec] = field(default_factory=dict, init=False)
    _shown: dict[str, dict[str, Any]] = field(default_factory=dict, init=False)  # tested code -> its rows

    def __post_init__(self) -> None:
        specs = [*_workspace_specs(), *_data_specs(), _COMMIT]
        if self.self_test:
            specs.append(_TEST_DRAFT)
        if self.offline is not None:
            specs.append(_OFFLINE)
        if self.history is not None:
            specs.extend(
                _history_specs(HistoryTools.TOOLS + (HistoryTools.ROW_TOOLS if self.row_traces else ()))
            )
        if self.request.operator is not None:
            specs.append(_CHECK_PRIMITIVES)
        self._specs = {spec.name: spec for spec in specs}

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(self._specs.values())

    def call(self, call: ToolCall) -> ToolAnswer:
        """Run one tool call; an unknown tool, bad arguments or a failing tool is an error answer."""
        if call.name not in self._specs:
            return ToolAnswer(f"error: no tool {call.name!r} (tools: {', '.join(self._specs)})", error=True)
        if call.arguments is None:
            return ToolAnswer(f"error: the arguments of {call.name} are not a JSON object: {call.raw_arguments[:200]}",
                              error=True)  # fmt: skip
        problem = _check_arguments(self._specs[call.name], call.arguments)
        if problem:
            return ToolAnswer(f"error: {call.name}: {problem}", error=True)
        try:
            return self._dispatch(call.name, dict(call.arguments))
        except (CocoError, WorkspaceError, ValueError) as error:
            return ToolAnswer(f"error: {call.name}: {_one_line(error)}", error=True)
        except Exception as error:  # not the agent's mistake: this mutation ends, the run goes on
            raise Discard(
                f"tool {call.name} failed: {type(error).__name__}: {_one_line(error)[:300]}"
            ) from error

    # -- dispatch ----------------------------------------------------------------------------------------------
    def _dispatch(self, name: str, args: dict[str, Any]) -> ToolAnswer:
        env = self.request.env
        if name == "read_candidate":
            return ToolAnswer(self.workspace.code)
        if name == "write_candidate":
            return ToolAnswer(self.workspace.write(args["code"]))
        if name == "edit_candidate":
            return ToolAnswer(self.workspace.edit(args["search"], args["replace"]))
        if name == "check":
            problem = env.check(self.workspace.code)
            if problem is not None:
                self.invalid_candidates += 1
                return ToolAnswer(f"rejected: {problem}", error=True)
            return ToolAnswer("ok: the candidate passes the validator")
        if name == "query":
            return _json(env.query(args["sql"], limit=int(args.get("limit", 50))))
        if name == "show_draft":
            limit = min(int(args.get("limit", self.test_rows)), self.test_rows)
            if self.workspace.code in self._shown:  # tested already: its rows again, nothing runs
                return _json(_first_rows(self._shown[self.workspace.code], limit))
            return self._show("show_draft", limit)
        if name == "test_draft":
            return self._show("test_draft", self.test_rows)
        if name == "offline_search":
            assert self.offline is not None
            proposal = self.offline.propose(self.request, self.rng)
            return _json(
                {"code": proposal.code, "approach": proposal.approach, "strategy": proposal.strategy}
            )
        if name == "check_primitives":
            assert self.request.operator is not None
            problem = self.request.operator.check(self.workspace.code)
            return ToolAnswer("ok: the candidate keeps the primitive contract" if problem is None
                              else f"violation: {problem}", error=problem is not None)  # fmt: skip
        if name == "commit":
            return self._commit(args)
        assert self.history is not None
        return _json(self.history.call(name, **args))

    def _show(self, tool: str, limit: int) -> ToolAnswer:
        """One draft test of the candidate (it spends one of `max_tests`), its first `limit` rows shown."""
        if self.tests_used >= self.max_tests:
            return ToolAnswer(f"error: {tool}: the {self.max_tests} draft tests of this mutation are spent "
                              "(test_draft and show_draft share them); commit now", error=True)  # fmt: skip
        env = self.request.env
        code = self.workspace.code
        problem = env.check(code)
        if problem is not None:
            self.invalid_candidates += 1
            return ToolAnswer(f"rejected: {problem}", error=True)
        self.tests_used += 1
        shown = env.show_draft(code, limit=self.test_rows)
        self._shown[code] = shown
        return _json(_first_rows(shown, limit))

    def _commit(self, args: Mapping[str, Any]) -> ToolAnswer:
        problem = self.request.env.check(self.workspace.code)
        if problem is not None:
            self.invalid_candidates += 1
            return ToolAnswer(f"rejected, not committed: {problem}", error=True)
        if " ".join(self.workspace.code.split()) == " ".join(self.request.parent.code.split()):
            return ToolAnswer(
                "error: commit: the candidate is the parent unchanged; edit it first", error=True
            )
        approach = str(args["approach"])
        direction = str(args.get("direction") or "").strip() or None
        if approach == "new" and direction is None:
            return ToolAnswer(
                "error: commit: approach 'new' needs `direction`, a short name for the idea", error=True
            )
        commit = Commit(self.workspace.code, approach, " ".join(str(args["description"]).split()), direction)
        return ToolAnswer("committed", commit=commit)


# -- schemas -------------------------------------------------------------------------------------------------
def _spec(
    name: str, description: str, properties: Mapping[str, Any], required: tuple[str, ...] = ()
) -> ToolSpec:
    return ToolSpec(
        name, description, {"type": "object", "properties": dict(properties), "required": list(required)}
    )


_STR = {"type": "string"}
_INT = {"type": "integer", "minimum": 1}
_COMMIT = _spec(
    "commit",
    "Finish: submit the workspace's candidate as this iteration's child.",
    {
        "approach": {"type": "string", "enum": ["hillclimb", "new"],
                     "description": "hillclimb: refine the parent's idea; new: a different idea"},
        "description": {"type": "string", "description": "one line: what the child changes"},
        "direction": {"type": "string", "description": "with approach 'new': a short name for the idea"},
    },
    ("approach", "description"),
)  # fmt: skip
_TEST_DRAFT = _spec(
    "test_draft",
    "Score the candidate on the training rows: its train score and up to 10 rows (failures first). Spends one "
    "of the mutation's draft tests (shared with show_draft).",
    {},
)
_CHECK_PRIMITIVES = _spec(
    "check_primitives",
    "Check the candidate against this iteration's primitive operator (the task says which): 'ok' or the "
    "violation, e.g. a primitive it must call and does not.",
    {},
)
_OFFLINE = _spec(
    "offline_search",
    "Run the exact offline operators (guard screening in one query, joint rule fit, leaf changes) from the "
    "parent and return the child they would commit, with its approach. Does not change the workspace.",
    {},
)


def _workspace_specs() -> list[ToolSpec]:
    return [
        _spec("read_candidate", "The candidate program in the workspace, exactly.", {}),
        _spec("write_candidate", "Replace the whole candidate.", {"code": _STR}, ("code",)),
        _spec("edit_candidate", "Replace text that occurs exactly once in the candidate.",
              {"search": _STR, "replace": _STR}, ("search", "replace")),
    ]  # fmt: skip


def _data_specs() -> list[ToolSpec]:
    return [
        _spec("query", "Run one read-only SQL query over the training rows: the relation `input` holds their "
              "input columns (not the labels: show_draft and test_draft compare outputs with those). Returns "
              "the columns and at most `limit` rows.",
              {"sql": _STR, "limit": _INT}, ("sql",)),
        _spec("check", "Validate the candidate without running it: 'ok' or the validator's reason.", {}),
        _spec("show_draft", "Run the candidate and show outputs against expected on a few training rows. "
              "Spends one of the mutation's draft tests, unless this candidate was tested already.",
              {"limit": _INT}),
    ]  # fmt: skip


def _history_specs(names: tuple[str, ...]) -> list[ToolSpec]:
    """One spec per history tool of `names`, its parameters read off `HistoryTools`' signature and docstring."""
    specs = []
    for name in names:
        method = getattr(HistoryTools, name)
        properties: dict[str, Any] = {}
        required = []
        for parameter in list(inspect.signature(method).parameters.values())[1:]:
            kind = "integer" if parameter.annotation in (int, "int") else "string"
            properties[parameter.name] = {"type": kind}
            if parameter.default is inspect.Parameter.empty:
                required.append(parameter.name)
        doc = " ".join((inspect.getdoc(method) or name).split())
        specs.append(_spec(name, doc[:400], properties, tuple(required)))
    return specs


def _check_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> str | None:
    """The first way `arguments` break the tool's schema (required, unknown, type, enum), or None."""
    properties = spec.parameters.get("properties", {})
    for name in spec.parameters.get("required", []):
        if name not in arguments:
            return f"missing argument {name!r}"
    for name, value in arguments.items():
        if name not in properties:
            return f"unknown argument {name!r} (arguments: {', '.join(properties) or 'none'})"
        schema = properties[name]
        if schema.get("type") == "integer" and (isinstance(value, bool) or not isinstance(value, int)):
            return f"argument {name!r} must be an integer, got {value!r}"
        if schema.get("type") == "string" and not isinstance(value, str):
            return f"argument {name!r} must be a string, got {type(value).__name__}"
        if "enum" in schema and value not in schema["enum"]:
            return f"argument {name!r} must be one of {schema['enum']}, got {value!r}"
    return None


def _json(value: Any) -> ToolAnswer:
    text = json.dumps(value, default=str)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f" ... [cut: {len(text):,} characters in all]"
    return ToolAnswer(text)


def _first_rows(shown: dict[str, Any], limit: int) -> dict[str, Any]:
    """A draft test's answer with its first `limit` rows (they are failures first: a smaller limit is a prefix)."""
    return {**shown, "rows": shown["rows"][:limit]}


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__
