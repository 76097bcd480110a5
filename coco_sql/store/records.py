"""Plain records that cross the store boundary. One dataclass per table; no behaviour beyond conversion."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from json.encoder import encode_basestring_ascii
from typing import TYPE_CHECKING, Any, overload

import numpy as np

if TYPE_CHECKING:
    from coco_sql.llm.cache import CachedEmbedding, CachedResponse
    from coco_sql.llm.usage import Usage


# The event a run under a deploy-cost limit (`engine.deploy_cost`) writes for each child; a child whose payload says
# `"within": false` was over the limit, and is never champion (`engine.champion`).
DEPLOY_COST_EVENT = "deploy_cost"
# The event of a parent the mutator had nothing left to try for (`Proposal.exhausted`): the loop never draws it again.
EXHAUSTED_EVENT = "parent_exhausted"


def program_id_for(run_id: int, iteration: int) -> str:
    """Program ids are '<run>-<iteration>': readable in SQL, and equal across a resumed and an uninterrupted run."""
    return f"{run_id}-{iteration}"


@dataclass(frozen=True)
class RunRecord:
    run_id: int
    task: str
    task_fingerprint: str
    seed: int
    budget: int
    config: dict[str, Any]
    status: str = "running"
    created_at: datetime | None = None
    finished_at: datetime | None = None


@dataclass(frozen=True)
class ProgramRecord:
    program_id: str
    run_id: int
    iteration: int
    parent_id: str | None
    donor_id: str | None
    code: str
    language: str
    dialect: str
    island: int
    cell: str | None
    approach: str | None
    strategy: str | None
    valid: bool
    error: str | None


@dataclass(frozen=True)
class EvaluationRow:
    instance_id: str
    score: float
    output: str | None
    expected: str | None
    error: str | None
    observation: dict[str, Any] = field(default_factory=dict)
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0


@dataclass(frozen=True, eq=False)
class EvaluationColumns(Sequence[EvaluationRow]):
    """A split's evaluation rows held as columns, the evaluator's form of them: at a million rows one object per
    row (`EvaluationRow`) cost more time and memory than scoring the rows, so the evaluator, the run state and
    the stores read these columns, and the rows are built only for a caller that reads them as rows.

    As a sequence it is the tuple of `EvaluationRow`s the rows stand for: built on the first iteration and kept
    (indexing one row builds only that row). The columns are shared, never copied, and nobody may change them
    (`expected` is the evaluator's per-split cache). A row without an error carries `observation`, a row with
    one `error_observation` (each one dict shared by its rows, as the evaluator always made them); the AI
    counts of a row are 0 (an evaluation's AI usage is per split, `SplitEvaluation.usage`)."""

    instance_ids: Sequence[str]
    scores: np.ndarray  # float64, one per row
    outputs: Sequence[str | None]  # the output as stored JSON text; None when there is none
    expected: Sequence[str | None]  # the expected value as stored JSON text
    errors: Sequence[str | None]
    observation: Mapping[str, Any]
    error_observation: Mapping[str, Any]
    latency_ms: float = 0.0  # each row's share of the evaluation's wall time

    def __len__(self) -> int:
        return len(self.instance_ids)

    @overload
    def __getitem__(self, index: int) -> EvaluationRow: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[EvaluationRow, ...]: ...

    def __getitem__(self, index: int | slice) -> EvaluationRow | tuple[EvaluationRow, ...]:
        if isinstance(index, slice):
            return self.materialised[index]
        if "materialised" in self.__dict__:
            return self.materialised[index]
        k = range(len(self))[index]  # negative indices, and IndexError past the end
        return self._row(k)

    def __iter__(self) -> Iterator[EvaluationRow]:
        return iter(self.materialised)

    @cached_property
    def materialised(self) -> tuple[EvaluationRow, ...]:
        """Every row as an `EvaluationRow`, built once (only callers that read rows pay for them)."""
        ok, failed, latency = self.observation, self.error_observation, self.latency_ms
        return tuple(
            EvaluationRow(
                i, score, output, expected, error, ok if error is None else failed, latency_ms=latency
            )
            for i, score, output, expected, error in zip(
                self.instance_ids, self.scores.tolist(), self.outputs, self.expected, self.errors, strict=True
            )
        )

    def _row(self, k: int) -> EvaluationRow:
        error = self.errors[k]
        return EvaluationRow(
            self.instance_ids[k],
            float(self.scores[k]),
            self.outputs[k],
            self.expected[k],
            error,
            self.observation if error is None else self.error_observation,
            latency_ms=self.latency_ms,
        )


@dataclass(frozen=True)
class ProgramScore:
    program_id: str
    split: str
    score: float
    n_rows: int
    n_errors: int
    model_calls: int
    input_tokens: int
    output_tokens: int
    latency_ms: float
    cache_hits: int = 0  # AI calls answered from the response cache (model_calls counts the others)


@dataclass(frozen=True)
class SplitEvaluation:
    """A program's evaluation on one split: the aggregate and its rows, written together. The evaluator's rows
    are `EvaluationColumns`, which the stores write column by column; a tuple of rows is written row by row."""

    summary: ProgramScore
    rows: Sequence[EvaluationRow]
    usage: Usage | None = None  # its AI calls, for the cost ledger (ai_usage, ai_calls)


@dataclass(frozen=True)
class DeployUsage:
    """What one program's validation evaluation used, cache hits included: the raw totals behind its deploy cost
    (`engine.deploy_cost.DeployCost.per_1000`). `rows`: the validation rows it ran on; `calls`: AI calls (rows
    answered, by a provider or the cache); `models`: (model, input tokens, output tokens), cached ones included,
    by model name."""

    program_id: str
    rows: int
    calls: int = 0
    models: tuple[tuple[str, int, int], ...] = ()


def deploy_usage_of(rows: Sequence[Sequence[Any]]) -> dict[str, DeployUsage]:
    """`DeployUsage` by program from rows of (program_id, validation rows, model, calls, input tokens, output
    tokens), one per program and model; a program without AI usage has one row with model None."""
    totals: dict[str, tuple[int, int, list[tuple[str, int, int]]]] = {}
    for program_id, n_rows, model, calls, tokens_in, tokens_out in rows:
        _, spent, models = totals.setdefault(str(program_id), (int(n_rows), 0, []))
        if model is not None:
            models.append((str(model), int(tokens_in or 0), int(tokens_out or 0)))
            totals[str(program_id)] = (int(n_rows), spent + int(calls or 0), models)
    return {
        pid: DeployUsage(pid, n, calls, tuple(sorted(models))) for pid, (n, calls, models) in totals.items()
    }


@dataclass(frozen=True)
class ArchiveEntry:
    iteration: int
    seq: int
    island: int
    cell: str
    program_id: str
    reason: str  # seed | admitted | migrated


@dataclass(frozen=True)
class LedgerEntry:
    iteration: int
    program_id: str
    strategy: str
    kind: str
    status: str
    parent_score: float | None
    child_score: float | None
    score_delta: float | None
    paradigm: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Event:
    iteration: int
    kind: str
    program_id: str | None = None
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentTurn:
    """One message of a mutator's conversation with a chat model (table `agent_turns`).

    A transcript holds only what the mutator saw and said: its prompts, the model's answers and the results of
    its tools, which serve training rows only. `turn` is the message's 0-based position in the iteration's
    conversation of `agent`; `input_tokens` / `output_tokens` are what the model call that produced an assistant
    turn cost (0 for the other roles)."""

    agent: str  # the model role: 'agent' | 'reflector' | 'proposer' | a baseline's name
    turn: int
    role: str  # system | user | assistant | tool
    content: str
    tool_calls: tuple[dict[str, Any], ...] = ()  # an assistant turn's calls: {"id", "name", "arguments"}
    tool_call_id: str | None = None  # a tool turn: the call it answers
    tool_name: str | None = None  # a tool turn: the tool that answered
    input_tokens: int = 0
    output_tokens: int = 0
    template: str | None = None  # 'name@version' of the prompt template the turn was rendered from
    model: str | None = None


@dataclass(frozen=True)
class Primitive:
    """A reusable primitive of a run's library (table `primitives`; PACE's EAP, "Primitive-Aware Operators").

    `code` is the definition as a program carries it: a SQL `CREATE MACRO name(a, b) AS expression;`
    statement, or a Python `def` (preceded by the import lines it needs). `signature` is e.g. 'p_lock(p1)'.
    `how` says where it came from: 'extracted' (refactored out of `origin_program`, E2), 'generated' (E1/E3)
    or 'seeded'."""

    name: str
    language: str  # sql | python
    code: str
    signature: str
    origin_program: str | None
    created_iteration: int
    how: str  # extracted | generated | seeded


@dataclass(frozen=True)
class LabelError:
    """A training row flagged as a likely label error at a run's end (table `label_errors`,
    `search.label_noise`): its label as given (JSON text), the label its nearest training rows hold instead and
    their share, and how many programs ran on it (none solved it)."""

    instance_id: str
    text: str
    label: str
    neighbours_label: str
    neighbour_share: float
    programs: int


@dataclass(frozen=True)
class PrimitiveTrial:
    """One use of the library by an operator (table `primitive_trials`): the child `program_id` made by
    `operator` ('P1'..'P4') around the `focus` primitive, compared with its parent. `verified` says the
    operator's contract held on the child's call set; `reason` is the violation when it did not. Only verified
    trials update the focus's posterior (`primitives.thompson`)."""

    iteration: int
    program_id: str
    operator: str  # P1 | P2 | P3 | P4
    focus: str | None
    parent_score: float | None
    child_score: float | None  # None when the child failed
    improved: bool  # child_score > parent_score
    verified: bool
    reason: str | None = None


@dataclass(frozen=True)
class IterationBatch:
    """Everything one iteration writes. The store commits it as one transaction: all of it or none."""

    run_id: int
    iteration: int
    # a new run's row, written with its seed's batch: a run that fails before its seed is scored leaves nothing
    new_run: RunRecord | None = None
    programs: tuple[ProgramRecord, ...] = ()
    evaluations: tuple[SplitEvaluation, ...] = ()
    archive: tuple[ArchiveEntry, ...] = ()
    ledger: tuple[LedgerEntry, ...] = ()
    events: tuple[Event, ...] = ()
    finish_run: bool = False
    drafts_usage: Usage | None = None  # AI usage of the mutator's draft tests and probes this iteration
    drafts_program_id: str | None = None
    ai_cache: tuple[CachedResponse, ...] = ()  # new cache entries made since the last batch
    ai_embeddings: tuple[CachedEmbedding, ...] = ()
    agent_turns: tuple[AgentTurn, ...] = ()  # the mutator's conversation this iteration (agent_turns)
    mutator_usage: Usage | None = None  # the mutator's own model spending this iteration (split 'mutator')
    # PACE: the primitives discovered this iteration (at most one per generation) and its operator trials
    primitives: tuple[Primitive, ...] = ()
    primitive_trials: tuple[PrimitiveTrial, ...] = ()
    label_errors: tuple[LabelError, ...] = ()  # likely label errors, written with the run's end (issue 38)


def to_json(value: Any) -> str:
    """Stable JSON for the store (sorted keys, numpy scalars converted). Ints, strings, booleans and None, the
    bulk of evaluation rows, take a shortcut with the same text as the encoder's."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if kind is int:
        return int.__repr__(value)
    if kind is bool:
        return "true" if value else "false"
    if value is None:
        return "null"
    return _ENCODER.encode(value)


def json_texts(values: Sequence[Any]) -> list[str | None]:
    """`to_json` of each value, None staying None (an output that is missing), with the same text. A column of
    only ints or only strings (and None), the usual evaluator outputs, is encoded by one C-level `map`."""
    kinds = set(map(type, values))
    if kinds == {int}:
        return list(map(int.__repr__, values))
    if kinds == {str}:
        return list(map(encode_basestring_ascii, values))
    return [None if value is None else to_json(value) for value in values]


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    if hasattr(value, "tolist"):  # numpy array
        return value.tolist()
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# One encoder for every call: json.dumps with keyword arguments builds a new JSONEncoder each time, which made
# this function a third of the evaluator's per-row cost. Stateless, so safe to share between threads.
_ENCODER = json.JSONEncoder(sort_keys=True, default=_json_default)
