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
from dataclasses import replace
from functools import partial
from typing import Any, TypeVar

import numpy as np

from coco_sql.core.outcome import Outcome
from coco_sql.errors import CandidateRejected, ConfigError, EvaluationError, EvaluationTimeout
from coco_sql.evaluate.matching import match_rows
from coco_sql.evaluate.warm import run_warm
from coco_sql.languages import Language, Program, Runner, language_for
from coco_sql.languages.base import QueryEngine, ScoresRows, outcome_score
from coco_sql.llm.providers.base import Deadline
from coco_sql.llm.routing import AiConfig
from coco_sql.llm.runtime import AiRuntime
from coco_sql.llm.usage import Usage
from coco_sql.plugin_loader import local_functions
from coco_sql.sandbox import QueryResult, Sandbox
from coco_sql.sandbox.lockdown import WALL_FACTOR
from coco_sql.store.records import (
    EvaluationColumns,
    EvaluationRow,
    json_texts,
    to_json,
)
from coco_sql.tasks import Split, TaskPack
from coco_sql.tasks.coerce import coerce_outputs

T = TypeVar("T")

SEARCH_SPLITS: tuple[str, ...] = ("train", "val")
REPORT_SPLITS: tuple[str, ...] = ("test",)


class Evaluator:
    """Evaluates programs of one task on a fixed set of splits.

    The search builds its evaluator with SEARCH_SPLITS and cannot score the test split through it; reports
    build a separate one with REPORT_SPLITS. Results are memoised per (split, SQL, minibatch rows): programs are
    deterministic, so re-running an unchanged program is wasted work. The memo holds at most `cache_size`
    outcomes and `cache_rows` evaluation rows (the latest outcome always), so huge splits do not pile up: an
    outcome's row costs about 100 bytes as columns (its output's JSON text, its score, shared ids and expected
    values) and about 250 more once a caller has read it as an `EvaluationRow`, so the default bound keeps the
    memo near 0.1-0.35 GB.
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
        self._functions = local_functions(self.ai) if self.ai is not None else None
        self.splits = tuple(splits)
        self.language: Language = language if language is not None else language_for(task)
        self._runners: dict[str, Runner] = {}
        self._probes: dict[str, Sandbox] = {}  # data sandboxes of languages whose runner has no query engine
        self._memo: OrderedDict[tuple[str, str, tuple[str, ...] | None], Outcome] = OrderedDict()
        self._cache_size = cache_size
        self._cache_rows = (
            cache_rows  # evaluation rows the memo holds at most: outcomes of huge splits are big
        )
        self._memo_rows = 0
        self._expected: dict[str, dict[str, str]] = {}
        self._expected_columns: dict[str, list[str]] = {}
        self._ids: dict[str, tuple[str, ...]] = {}
        self._index: dict[str, dict[str, int] | None] = {}  # split -> id -> row (`_subset`)
        self._data: dict[str, Split] = {}  # one copy of each split (`TaskPack.split` copies on every call)

    def check(self, code: str) -> Program:
        """Validate without running (raises CandidateRejected)."""
        return self.language.validate(code)

    def evaluate(
        self, code: str, split: str, ids: Sequence[str] | None = None, *, warm: bool = False
    ) -> Outcome:
        """Score `code` on every row of `split`, or only on its rows `ids` (a minibatch, run over just those rows).
        Never raises for a bad candidate: failures become row errors. `warm`: the task's deadline holds for a
        warm evaluation (`evaluate.warm`): the seed's and a report's first run fills the AI cache first."""
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
        outcome = replace(self._run(program, split, None if ids is None else data, warm), program=program)
        self._memo[key] = outcome
        self._memo_rows += len(outcome.ids)
        while len(self._memo) > 1 and (
            len(self._memo) > self._cache_size or self._memo_rows > self._cache_rows
        ):
            _, dropped = self._memo.popitem(last=False)
            self._memo_rows -= len(dropped.ids)
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
        return data if ids is None else self._subset(split, ids)

    def _subset(self, split: str, ids: Sequence[str]) -> Split:
        """`Split.subset(ids)` of the whole split, found by position: `Split.subset` scans every row of the split
        (a pandas `isin` and a dict filter, about 0.15 s at a million rows), three times an iteration with
        minibatches, for samples of a thousand rows. The same split when its inputs' ids are its expected ids
        in the same order (checked once) and `ids` are text; `Split.subset` itself otherwise."""
        index = self._positions(split)
        if index is None or not all(type(i) is str for i in ids):
            return self._whole(split).subset(ids)
        whole, order = self._whole(split), self._split_ids(split)
        positions = sorted({index[i] for i in ids if i in index})
        inputs = whole.inputs.iloc[positions].reset_index(drop=True)
        return Split(whole.name, inputs, {order[k]: whole.expected[order[k]] for k in positions})

    def _positions(self, split: str) -> dict[str, int] | None:
        """id -> row of the whole split, or None when its inputs are not in its expected values' order. Splits
        of the same rows (train and val of a `shared` task) share one (about 70 MB at a million rows)."""
        if split not in self._index:
            whole, order = self._whole(split), self._split_ids(split)
            index = None
            if len(whole.inputs) == len(order) and tuple(whole.inputs["id"].astype(str)) == order:
                index = next(
                    (
                        known
                        for other, known in self._index.items()
                        if known and self._split_ids(other) == order
                    ),
                    None,
                ) or {i: k for k, i in enumerate(order)}
            self._index[split] = index
        return self._index[split]

    def probe(self, sql: str, split: str, deadline_s: float) -> QueryResult:
        """Run one read-only SQL query (DuckDB text) over `split`'s rows in its query engine (the mutator's live
        probes, for programs of every language), which holds only that split's rows and must read the text as
        exactly one SELECT. Its AI calls are accounted like an evaluation's."""
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

    def program_columns(self, code: str, split: str, deadline_s: float) -> QueryResult:
        """Every column a program's query selects on `split`'s rows, run where its programs run (a probe of the
        program itself, accounted as a probe is). EvaluationError for a kind whose runner gives one output."""
        if split not in self.splits:
            raise ConfigError(
                f"this evaluator may not read the {split!r} split (allowed: {', '.join(self.splits)})"
            )
        program = self.check(code)
        select = getattr(self._runner(split), "select", None)
        if select is None:
            raise EvaluationError(f"a {self.language.name} program gives its output only")
        result, _ = self._execute(lambda on_timeout: select(program, deadline_s, on_timeout), deadline_s)
        return result

    def _execute(self, run: Callable[..., T], deadline_s: float) -> tuple[T, Usage | None]:
        """`run(on_timeout=...)` under a deadline; with AI functions, every call it makes is bound to that
        deadline and accounted in the returned Usage.

        Raises EvaluationTimeout past the deadline (also when only AI calls were cut off by it, and the query
        itself finished), EvaluationError for a failing query, and the runtime's run-level error (a dead
        endpoint, an unknown model) instead of either when there is one. A failed query's usage stays readable
        as `self.ai.usage`."""
        if self.ai is None:
            result = run(on_timeout=None)
            return result, getattr(result, "usage", None)
        # The query's own deadline is CPU time, counted by the sandbox (`sandbox.lockdown`); the AI calls it
        # waits for are bounded by the same wall-time backstop, so that load on the machine decides nothing.
        deadline = Deadline.after(deadline_s * WALL_FACTOR)
        with self.ai.evaluation(deadline) as usage:
            try:
                result = run(on_timeout=deadline.cancel)
            except EvaluationError:
                if self.ai.fatal is not None:  # the run stops; the program itself may be fine
                    raise self.ai.fatal from None
                raise
            billed = getattr(result, "usage", None)  # a warehouse's meter: its AI calls were Cortex's
            if billed is not None:
                usage.merge(billed)
        if self.ai.fatal is not None:
            raise self.ai.fatal
        left = deadline.remaining()
        if deadline.cancelled.is_set() or (left is not None and left <= 0):
            raise EvaluationTimeout(
                f"query exceeded {deadline_s * WALL_FACTOR:g} s ({WALL_FACTOR:g} times its {deadline_s:g} s "
                "deadline) in wall time and was stopped"
            )
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

    def _probe_sandbox(self, split: str) -> QueryEngine:
        """The split's query engine: its runner's own (the SQL runner's sandbox, a warehouse runner's staged
        rows), or a DuckDB sandbox kept for probes."""
        shared = getattr(self._runner(split), "probe_sandbox", None)
        if shared is not None:
            return shared
        if split not in self._probes:
            self._probes[split] = Sandbox(self._whole(split).inputs)
        return self._probes[split]

    def probe_dialect(self, split: str) -> str:
        """The dialect `split`'s query engine runs probes in (a warehouse translates their DuckDB text)."""
        return self._probe_sandbox(split).dialect

    def _run(self, program: Program, split: str, sample: Split | None = None, warm: bool = False) -> Outcome:
        """Run on the split's own runner, or on a runner over just the rows of `sample` (closed afterwards);
        `warm`: as `evaluate.warm.run_warm` says."""
        runner = self._runner(split) if sample is None else self.language.runner(sample, self._functions)
        data = sample if sample is not None else self._whole(split)
        try:
            attempt = partial(self._attempt, runner, program, split, data)
            if warm and self.ai is not None:
                return run_warm(attempt, self.task.timeout_seconds)
            return attempt(self.task.timeout_seconds)[0]
        finally:
            if sample is not None:
                runner.close()

    def _attempt(
        self, runner: Runner, program: Program, split: str, data: Split, deadline_s: float
    ) -> tuple[Outcome, bool]:
        """One run under `deadline_s`, scored (a failure is every row's error), and whether it passed its
        deadline while it called a model (a cold AI cache: `evaluate.warm`)."""
        try:
            result, usage = self._execute(
                lambda on_timeout: runner.run(program, deadline_s, on_timeout), deadline_s
            )
        except EvaluationError as error:
            failed = replace(
                self._failed(split, str(error), 0.0, data), usage=self.ai.usage if self.ai else None
            )
            called = failed.usage is not None and failed.usage.provider_call_count > 0
            return failed, isinstance(error, EvaluationTimeout) and called
        outcome = self._score(split, result.outputs, result.elapsed_ms, result.errors, data)
        if result.observations:
            outcome = replace(outcome, rows=_observed(outcome.rows, result.observations))
        return replace(outcome, usage=usage), False

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
        """Score a program's (id, output) rows against the split's (or the sample `data`'s) rows, as columns.

        Per row: no output row is an error (`row_errors`' reason, else "no output row for this id"), several
        are one, an output that does not convert to the contract type is one; the rest are scored by the task's
        scorer. The observation of every row says ok or row_error, with `extra_ids` when the program returned
        ids that are not in the split."""
        ids, expected_json, expected = self._rows_of(split, data)
        values, errors, extra = match_rows(ids, result_rows, row_errors or {})
        contract = self.task.contract.type
        outputs, failures = coerce_outputs(values, contract)
        for k, message in failures.items():
            errors[k] = f"output is not {contract}: {message}"
        if isinstance(self.language, ScoresRows):
            raw = self.language.score_rows(data or self._whole(split), ids, outputs, expected)
        else:
            raw = self.task.scorer.score(outputs, expected)
        scores = np.asarray(raw, dtype=np.float64)
        scores.setflags(write=False)  # shared with the memo and the run state's rows: nobody may change it
        # one observation object per kind, shared by the rows (never mutated): a dict per row was 70 MB per
        # 800,000 rows
        ok, row_error = (
            {"status": status} | ({"extra_ids": extra} if extra else {}) for status in ("ok", "row_error")
        )
        columns = EvaluationColumns(
            ids,
            scores,
            json_texts(outputs),
            expected_json,
            errors,
            ok,
            row_error,
            elapsed_ms / max(len(ids), 1),
        )
        mean = outcome_score(self.language, ids, scores.tolist())  # the plain mean, or the kind's own (dbt)
        return Outcome(split=split, rows=columns, score=mean, error=None, latency_ms=elapsed_ms)

    def _rows_of(self, split: str, data: Split | None) -> tuple[Sequence[str], list[str], list[object]]:
        """(ids, expected JSON texts, expected values) of the rows scored, in split order: for the whole split
        the evaluator's own columns (shared by every outcome, never copied), for a sample the sample's."""
        whole = self._whole(split)
        if data is None or data is whole:
            return self._split_ids(split), self._expected_column(split), list(whole.expected.values())
        by_id = self._expected_json(split)
        ids = tuple(data.expected)
        return ids, [by_id[i] for i in ids], list(data.expected.values())

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

    def _expected_column(self, split: str) -> list[str]:
        """`_expected_json` in split order: the `expected` column of every whole-split outcome (the texts are
        the dict's own strings, not copies)."""
        if split not in self._expected_columns:
            self._expected_columns[split] = list(self._expected_json(split).values())
        return self._expected_columns[split]

    def _split_ids(self, split: str) -> tuple[str, ...]:
        """The split's instance ids in split order: the `ids` of every whole-split outcome (one tuple, shared,
        so `RunState.add` recognises a whole-split outcome with one comparison)."""
        if split not in self._ids:
            self._ids[split] = tuple(self._whole(split).expected)
        return self._ids[split]

    def _failed(self, split: str, message: str, elapsed_ms: float, data: Split | None = None) -> Outcome:
        ids, expected_json, _ = self._rows_of(split, data)
        observation = {"status": "program_error"}
        scores = np.zeros(len(ids))
        scores.setflags(write=False)
        columns = EvaluationColumns(
            ids,
            scores,
            [None] * len(ids),
            expected_json,
            [message] * len(ids),
            observation,
            observation,
            elapsed_ms / max(len(ids), 1),
        )
        return Outcome(split=split, rows=columns, score=0.0, error=message, latency_ms=elapsed_ms)


def _observed(
    rows: Sequence[EvaluationRow], observations: Mapping[str, Mapping[str, Any]]
) -> tuple[EvaluationRow, ...]:
    """The rows with what the program did on each (`RunResult.observations`) under the observation's ``trace``:
    a kind whose runs leave a trace stores it with the row (a data agent's messages, tool calls and results)."""
    return tuple(
        replace(row, observation={**row.observation, "trace": observations[row.instance_id]})
        if row.instance_id in observations
        else row
        for row in rows
    )
