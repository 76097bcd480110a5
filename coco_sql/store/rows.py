"""One iteration's records as table rows, in each table's column order (`sql/schema.sql`).

Every store writes these rows; only how they travel differs (DuckDB: multi-row VALUES, unnested columns or an
Arrow table; Snowpark: a DataFrame appended with `save_as_table`). The evaluations, a million rows per split of a
warehouse table, are the exception to one tuple per row: `evaluation_chunks` gives them as columns, read straight
from the evaluator's `EvaluationColumns`, at most `EVALUATION_CHUNK_ROWS` rows at a time, so what a write holds
in Python lists stays bounded whatever the table's size.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

from coco_sql.store.records import EvaluationColumns, EvaluationRow, IterationBatch, to_json

Row = tuple[Any, ...]

#: Evaluation rows per chunk (`evaluation_chunks`): about 20 MB of Python lists, and one statement each.
EVALUATION_CHUNK_ROWS = 200_000

# The order tables are written in. On an engine without multi-table transactions (SnowparkStore) a row
# written later vouches for the rows written before it: a program's row for its iteration, a program_scores row
# for its evaluations, a run_finished event for the test scores (`SnowparkStore.recover`).
WRITE_ORDER = ("evaluations", "ai_usage", "ai_calls", "agent_turns", "primitives", "primitive_trials",
               "label_errors", "archive_entries", "ledger", "program_scores", "events", "programs")  # fmt: skip


def iteration_rows(batch: IterationBatch, now: datetime) -> dict[str, list[Row]]:
    """table -> rows for everything in `batch` except the AI cache entries (which are merged, not appended),
    in `WRITE_ORDER`. The evaluations as tuples too: the stores write them from `evaluation_chunks` instead."""
    rows = table_rows(batch, now)
    rows["evaluations"] = [row for chunk in evaluation_chunks(batch) for row in zip(*chunk, strict=True)]
    return {table: rows[table] for table in WRITE_ORDER}


def table_rows(batch: IterationBatch, now: datetime) -> dict[str, list[Row]]:
    """table -> rows for everything in `batch` but its evaluations (`evaluation_chunks`) and the AI cache
    entries (which are merged, not appended), in `WRITE_ORDER`."""
    run_id = batch.run_id
    usage_rows, call_rows = _ai_rows(batch, now)
    rows = {
        "program_scores": [
            (run_id, s.summary.program_id, s.summary.split, s.summary.score, s.summary.n_rows, s.summary.n_errors,
             s.summary.model_calls, s.summary.input_tokens, s.summary.output_tokens, s.summary.latency_ms, now,
             s.summary.cache_hits)
            for s in batch.evaluations
        ],
        "ai_usage": usage_rows,
        "ai_calls": call_rows,
        "agent_turns": [
            (run_id, batch.iteration, _child_id(batch), a.agent, a.turn, a.role, a.content,
             to_json(list(a.tool_calls)) if a.tool_calls else None, a.tool_call_id, a.tool_name, a.input_tokens,
             a.output_tokens, a.template, a.model, now)
            for a in batch.agent_turns
        ],
        "primitives": [
            (run_id, p.name, p.language, p.code, p.signature, p.origin_program, p.created_iteration, p.how, now)
            for p in batch.primitives
        ],
        "primitive_trials": [
            (run_id, t.iteration, t.program_id, t.operator, t.focus, t.parent_score, t.child_score, t.improved,
             t.verified, t.reason, now)
            for t in batch.primitive_trials
        ],
        "label_errors": [
            (run_id, batch.iteration, e.instance_id, e.text, e.label, e.neighbours_label, e.neighbour_share, e.programs, now)
            for e in batch.label_errors
        ],
        "archive_entries": [
            (run_id, a.iteration, a.seq, a.island, a.cell, a.program_id, a.reason) for a in batch.archive
        ],
        "ledger": [
            (run_id, e.iteration, e.program_id, e.strategy, e.kind, e.status, e.parent_score, e.child_score,
             e.score_delta, e.paradigm, e.note, now)
            for e in batch.ledger
        ],
        "events": [
            (run_id, e.iteration, e.kind, e.program_id, to_json(e.payload), now, seq)
            for seq, e in enumerate(batch.events)
        ],
        "programs": [
            (p.program_id, p.run_id, p.iteration, p.parent_id, p.donor_id, p.code, p.language, p.dialect, p.island,
             p.cell, p.approach, p.strategy, p.valid, p.error, now)
            for p in batch.programs
        ],
    }  # fmt: skip
    return {table: rows[table] for table in WRITE_ORDER if table != "evaluations"}


def evaluation_chunks(batch: IterationBatch, size: int | None = None) -> Iterator[list[list[Any]]]:
    """The evaluations table's rows of `batch` as its 13 columns (schema order), at most `size` rows per chunk
    (default `EVALUATION_CHUNK_ROWS`): small evaluations share a chunk, a large one is cut into several. The
    evaluator's `EvaluationColumns` are sliced, never turned into rows; a tuple of `EvaluationRow`s is read row
    by row."""
    size = size or EVALUATION_CHUNK_ROWS
    pending: list[list[Any]] = []
    held = 0
    for evaluation in batch.evaluations:
        rows, n, start = evaluation.rows, len(evaluation.rows), 0
        while start < n:
            stop = min(n, start + size - held)
            k = stop - start
            part = [
                [batch.run_id] * k,
                [evaluation.summary.program_id] * k,
                [evaluation.summary.split] * k,
                *_row_columns(rows, start, stop),
            ]
            if pending:
                for column, more in zip(pending, part, strict=True):
                    column.extend(more)
            else:
                pending = part
            held, start = held + k, stop
            if held >= size:
                yield pending
                pending, held = [], 0
    if pending:
        yield pending


def _row_columns(rows: Sequence[EvaluationRow], start: int, stop: int) -> list[list[Any]]:
    """Columns instance_id .. latency_ms of `rows[start:stop]`. The observation is stored as its JSON text:
    the evaluator's rows share two observations, so it encodes two."""
    if isinstance(rows, EvaluationColumns):
        k = stop - start
        errors = list(rows.errors[start:stop])
        ok, failed = to_json(rows.observation), to_json(rows.error_observation)
        return [
            list(rows.instance_ids[start:stop]),
            rows.scores[start:stop].tolist(),
            list(rows.outputs[start:stop]),
            list(rows.expected[start:stop]),
            errors,
            [ok if error is None else failed for error in errors],
            [0] * k,
            [0] * k,
            [0] * k,
            [rows.latency_ms] * k,
        ]
    part = rows[start:stop]
    return [
        [r.instance_id for r in part],
        [r.score for r in part],
        [r.output for r in part],
        [r.expected for r in part],
        [r.error for r in part],
        [to_json(r.observation) for r in part],
        [r.model_calls for r in part],
        [r.input_tokens for r in part],
        [r.output_tokens for r in part],
        [r.latency_ms for r in part],
    ]


def _child_id(batch: IterationBatch) -> str | None:
    """The program the iteration made (its one program row); the drafts' program id for a batch without one."""
    return next((p.program_id for p in batch.programs), batch.drafts_program_id)


def _ai_rows(batch: IterationBatch, now: datetime) -> tuple[list[Row], list[Row]]:
    """The cost ledger of one iteration: ai_usage (per evaluation x function x model) and ai_calls. Besides the
    evaluations' splits: 'drafts', the AI functions of the mutator's draft tests and probes, and 'mutator', the
    mutator's own chat models (function = the model role: agent, reflector, proposer, a baseline's name)."""
    tagged = [(s.summary.program_id, s.summary.split, s.usage) for s in batch.evaluations if s.usage]
    if batch.drafts_usage:
        tagged.append((batch.drafts_program_id, "drafts", batch.drafts_usage))
    if batch.mutator_usage:
        tagged.append((_child_id(batch), "mutator", batch.mutator_usage))
    usage_rows: list[Row] = []
    call_rows: list[Row] = []
    for program_id, split, usage in tagged:
        for (function, model), line in sorted(usage.lines.items()):
            usage_rows.append(
                (batch.run_id, batch.iteration, program_id, split, function, model, line.calls, line.cache_hits,
                 line.errors, line.input_tokens, line.output_tokens, line.cached_input_tokens,
                 line.cached_output_tokens, line.latency_ms, now)
            )  # fmt: skip
        for call in usage.provider_calls:
            call_rows.append(
                (batch.run_id, batch.iteration, program_id, split, call.function, call.model, call.provider,
                 call.items, call.input_tokens, call.output_tokens, call.latency_ms, call.error, now)
            )  # fmt: skip
    return usage_rows, call_rows
