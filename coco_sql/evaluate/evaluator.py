"""Score a candidate on one split: validate, run in the split's sandbox, score every row. Language-neutral: the
task's language (`coco_sql.languages`) validates the program and runs it; scoring is shared.

Scoring rules (the program contract, README "Program contract"):
- every instance of the split gets exactly one evaluation row;
- a rejected, failing or timed-out program scores 0 on every row, with the diagnostic as the row's error;
- an instance with no output row, several output rows, or an output that does not convert to the contract
  type scores 0 with the reason as its error;
- otherwise the task's scorer gives the row score in [0, 1].
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from coco_sql.aifuncs.functions import AiFunctions
from coco_sql.errors import CandidateRejected, ConfigError, EvaluationError, EvaluationTimeout
from coco_sql.languages import Language, Program, Runner, language_for
from coco_sql.llm.providers.base import Deadline
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.sandbox import QueryResult, Sandbox
from coco_sql.store.records import EvaluationRow, ProgramScore, SplitEvaluation, to_json
from coco_sql.tasks import Split, TaskPack, coerce_output

T = TypeVar("T")

SEARCH_SPLITS: tuple[str, ...] = ("train", "val")
REPORT_SPLITS: tuple[str, ...] = ("test",)


@dataclass(frozen=True)
class Outcome:
    """What running a program on a split produced, before it is tied to a program id."""

    split: str
    rows: tuple[EvaluationRow, ...]
    score: float
    error: str | None  # program-level diagnostic (rejection, runtime error, deadline), else None
    latency_ms: float
    program: Program | None = None  # the validated program, when it passed validation
    usage: Usage | None = None  # what its AI calls cost (None: the program made none)

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_split_evaluation(self, program_id: str) -> SplitEvaluation:
        return SplitEvaluation(
            summary=ProgramScore(
                program_id=program_id,
                split=self.split,
                score=self.score,
                n_rows=len(self.rows),
                n_errors=sum(1 for r in self.rows if r.error is not None),
                model_calls=self.usage.model_calls if self.usage else sum(r.model_calls for r in self.rows),
                input_tokens=self.usage.input_tokens
                if self.usage
                else sum(r.input_tokens for r in self.rows),
                output_tokens=self.usage.output_tokens
                if self.usage
                else sum(r.output_tokens for r in self.rows),
                latency_ms=self.latency_ms,
                cache_hits=self.usage.cache_hits if self.usage else 0,
            ),
            rows=self.rows,
            usage=self.usage,
        )


class Evaluator:
    """Evaluates programs of one task on a fixed set of splits.

    The search builds its evaluator with SEARCH_SPLITS and cannot score the test split through it; reports
    build a separate one with REPORT_SPLITS. Results are memoised per (split, SQL, minibatch rows): programs are
    deterministic, so re-running an unchanged program is wasted work. The memo holds at most `cache_size`
    outcomes and `cache_rows` evaluation rows (the latest outcome always), so huge splits do not pile up.
    """

    def __init__(
        self,
        task: TaskPack,
        splits: Iterable[str] = SEARCH_SPLITS,
        *,
        cache_size: int = 1024,
        cache_rows: int = 1_000_000,
        ai: AiRuntime | None = None,
        language: Language | None = None,
    ) -> None:
        self.task = task
        self.ai = ai if ai is not None or not task.uses_ai else AiRuntime(AiConfig.from_environment())
        self._functions = AiFunctions(self.ai) if self.ai is not None else None
        self.splits = tuple(splits)
        self.language: Language = language if language is not None else language_for(task)
        self._runners: dict[str, Runner] = {}
        self._probes: dict[str, Sandbox] = {}  # data sandboxes of languages whose runner is not one
        self._memo: OrderedDict[tuple[str, str, tuple[str, ...] | None], Outcome] = OrderedDict()
        self._cache_size = cache_size
        self._cache_rows = (
            cache_rows  # evaluation rows the memo holds at most: outcomes of huge splits are big
        )
        self._memo_rows = 0
        self._expected: dict[str, dict[str, str]] = {}
        self._data: dict[str, Split] = {}  # one copy of each split (`TaskPack.split` copies on every call)

    def check(self, code: str) -> Program:
        """Validate without running (raises CandidateRejected)."""
        return self.language.validate(code)

    def evaluate(self, code: str, split: str, ids: Sequence[str] | None = None) -> Outcome:
        """Score `code` on every row of `split`, or only on its rows `ids` (a minibatch, run over just those rows).
        Never raises for a bad candidate: failures become row errors."""
        data = self._split(split, ids)
        try:
            program = self.check(code)
        except CandidateRejected as rejection:
            return self._failed(split, f"rejected: {rejection}", 0.0, data)
        key = (split, program.runnable, None if ids is None else tuple(sorted(data.expected)))
        if key in self._memo:  # no query runs: every AI call it made is answered again from the cache
            self._memo.move_to_end(key)
            memo = self._memo[key]
            return memo if memo.usage is None else replace(memo, usage=memo.usage.replayed())
        outcome = replace(self._run(program, split, None if ids is None else data), program=program)
        self._memo[key] = outcome
        self._memo_rows += len(outcome.rows)
        while len(self._memo) > 1 and (
            len(self._memo) > self._cache_size or self._memo_rows > self._cache_rows
        ):
            _, dropped = self._memo.popitem(last=False)
            self._memo_rows -= len(dropped.rows)
        return outcome

    def memoised(self, code: str, split: str) -> Outcome | None:
        """`code`'s outcome on every row of `split` if the memo holds it (nothing runs), else None."""
        try:
            runnable = self.check(code).runnable
        except CandidateRejected:
            return None
        return self._memo.get((split, runnable, None))

    def failed(self, split: str, message: str, ids: Sequence[str] | None = None) -> Outcome:
        """The outcome of a program that never ran: every row of `split` (or of its rows `ids`) an error with
        `message` (a mutator that discarded its child)."""
        return self._failed(split, message, 0.0, self._split(split, ids))

    def _split(self, split: str, ids: Sequence[str] | None) -> Split:
        if split not in self.splits:
            raise ConfigError(
                f"this evaluator may not score the {split!r} split (allowed: {', '.join(self.splits)})"
            )
        data = self._whole(split)
        return data if ids is None else data.subset(ids)

    def probe(self, sql: str, split: str, deadline_s: float) -> QueryResult:
        """Run one read-only SQL query over `split`'s rows in its DuckDB sandbox (the mutator's live probes, for
        programs of every language).

        Only the split's own rows exist in that sandbox; DuckDB must read the text as exactly one SELECT.
        """
        if split not in self.splits:
            raise ConfigError(
                f"this evaluator may not read the {split!r} split (allowed: {', '.join(self.splits)})"
            )
        sandbox = self._probe_sandbox(split)
        try:
            kinds = sandbox.statement_types(sql)
        except EvaluationError as error:
            raise EvaluationError(f"probe does not parse: {error}") from None
        if kinds != ["SELECT"]:
            raise EvaluationError(f"a probe must be one SELECT, got {', '.join(kinds) or 'nothing'}")
        result, _ = self._execute(lambda on_timeout: sandbox.run(sql, deadline_s, on_timeout), deadline_s)
        return result

    def _execute(self, run: Callable[..., T], deadline_s: float) -> tuple[T, Usage | None]:
        """`run(on_timeout=...)` under a deadline; with AI functions, every call it makes is bound to that
        deadline and accounted in the returned Usage.

        Raises EvaluationTimeout past the deadline (also when only AI calls were cut off by it, and the query
        itself finished), EvaluationError for a failing query, and the runtime's run-level error (a dead
        endpoint, an unknown model) instead of either when there is one. A failed query's usage stays readable
        as `self.ai.usage`."""
        if self.ai is None:
            return run(on_timeout=None), None
        deadline = Deadline.after(deadline_s)
        with self.ai.evaluation(deadline) as usage:
            try:
                result = run(on_timeout=deadline.cancel)
            except EvaluationError:
                if self.ai.fatal is not None:  # the run stops; the program itself may be fine
                    raise self.ai.fatal from None
                raise
        if self.ai.fatal is not None:
            raise self.ai.fatal
        left = deadline.remaining()
        if deadline.cancelled.is_set() or (left is not None and left <= 0):
            raise EvaluationTimeout(f"query exceeded its {deadline_s:g} s deadline and was stopped")
        return result, usage

    def close(self) -> None:
        for closeable in (*self._runners.values(), *self._probes.values()):
            closeable.close()
        self._runners.clear()
        self._probes.clear()

    # -- internals -------------------------------------------------------------------------------------------
    def _runner(self, split: str) -> Runner:
        if split not in self._runners:
            self._runners[split] = self.language.runner(self._whole(split), self._functions)
        return self._runners[split]

    def _probe_sandbox(self, split: str) -> Sandbox:
        """The split's DuckDB sandbox: the SQL runner's own, or one kept for probes."""
        shared = getattr(self._runner(split), "probe_sandbox", None)
        if shared is not None:
            return shared
        if split not in self._probes:
            self._probes[split] = Sandbox(self._whole(split).inputs)
        return self._probes[split]

    def _run(self, program: Program, split: str, sample: Split | None = None) -> Outcome:
        """Run on the split's own runner, or on a runner over just the rows of `sample` (closed afterwards)."""
        runner = self._runner(split) if sample is None else self.language.runner(sample, self._functions)
        data = sample if sample is not None else self._whole(split)
        deadline_s = self.task.timeout_seconds
        try:
            result, usage = self._execute(
                lambda on_timeout: runner.run(program, deadline_s, on_timeout), deadline_s
            )
        except EvaluationError as error:
            failed = self._failed(split, str(error), 0.0, data)
            return replace(failed, usage=self.ai.usage if self.ai else None)
        finally:
            if sample is not None:
                runner.close()
        return replace(
            self._score(split, result.outputs, result.elapsed_ms, result.errors, data), usage=usage
        )

    def score_rows(
        self, split: str, result_rows: list[tuple[object, ...]], elapsed_ms: float = 0.0
    ) -> Outcome:
        """Score (id, output) pairs produced elsewhere (e.g. a batched screening query) as `evaluate` would."""
        if split not in self.splits:
            raise ConfigError(
                f"this evaluator may not score the {split!r} split (allowed: {', '.join(self.splits)})"
            )
        return self._score(split, result_rows, elapsed_ms)

    def _score(
        self,
        split: str,
        result_rows: list[tuple[object, ...]],
        elapsed_ms: float,
        row_errors: Mapping[str, str] | None = None,
        data: Split | None = None,
    ) -> Outcome:
        data = data if data is not None else self._whole(split)
        produced: dict[str, list[object]] = {}
        for instance_id, value in result_rows:
            produced.setdefault(str(instance_id), []).append(value)
        ids = list(data.expected)
        per_row_ms = elapsed_ms / max(len(ids), 1)
        outputs: list[object | None] = []
        errors: list[str | None] = []
        for instance_id in ids:
            values = produced.get(instance_id, [])
            if not values:
                outputs.append(None)
                errors.append((row_errors or {}).get(instance_id, "no output row for this id"))
            elif len(values) > 1:
                outputs.append(None)
                errors.append(f"{len(values)} output rows for this id (expected one)")
            else:
                try:
                    outputs.append(coerce_output(values[0], self.task.contract.type))
                    errors.append(None)
                except ValueError as error:
                    outputs.append(None)
                    errors.append(f"output is not {self.task.contract.type}: {error}")
        expected = [data.expected[i] for i in ids]
        scores = self.task.scorer.score(outputs, expected)
        extra = len(set(produced) - set(data.expected))
        expected_json = self._expected_json(split)
        # one observation object per kind, shared by the rows (never mutated): a dict per row was 70 MB per
        # 800,000 rows
        ok, row_error = (
            {"status": status} | ({"extra_ids": extra} if extra else {}) for status in ("ok", "row_error")
        )
        rows = tuple(
            EvaluationRow(
                instance_id=instance_id,
                score=float(score),
                output=None if output is None else to_json(output),
                expected=expected_json[instance_id],
                error=error,
                observation=ok if error is None else row_error,
                latency_ms=per_row_ms,
            )
            for instance_id, output, error, score in zip(ids, outputs, errors, scores, strict=True)
        )
        mean = sum(r.score for r in rows) / len(rows) if rows else 0.0
        return Outcome(split=split, rows=rows, score=mean, error=None, latency_ms=elapsed_ms)

    def _whole(self, split: str) -> Split:
        """Every row of `split`: the evaluator's own copy, made once (no caller may change it)."""
        if split not in self._data:
            self._data[split] = self.task.split(split)
        return self._data[split]

    def _expected_json(self, split: str) -> dict[str, str]:
        """Each row's expected value as stored JSON, computed once per split (it never changes)."""
        if split not in self._expected:
            self._expected[split] = {i: to_json(v) for i, v in self._whole(split).expected.items()}
        return self._expected[split]

    def _failed(self, split: str, message: str, elapsed_ms: float, data: Split | None = None) -> Outcome:
        data = data if data is not None else self._whole(split)
        expected_json = self._expected_json(split)
        observation = {"status": "program_error"}
        latency_ms = elapsed_ms / max(len(data.expected), 1)
        rows = tuple(
            EvaluationRow(
                instance_id=instance_id,
                score=0.0,
                output=None,
                expected=expected_json[instance_id],
                error=message,
                observation=observation,
                latency_ms=latency_ms,
            )
            for instance_id in data.expected
        )
        return Outcome(split=split, rows=rows, score=0.0, error=message, latency_ms=elapsed_ms)
