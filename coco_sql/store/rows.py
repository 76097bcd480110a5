"""One iteration's records as table rows, in each table's column order (`sql/schema.sql`).

Every store writes these tuples; only how they travel differs (DuckDB: multi-row VALUES or unnested columns;
Snowpark: a DataFrame appended with `save_as_table`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from coco_sql.store.records import IterationBatch, to_json

Row = tuple[Any, ...]

# The order tables are written in. On an engine without multi-table transactions (SnowparkStore) a row
# written later vouches for the rows written before it: a program's row for its iteration, a program_scores row
# for its evaluations, a run_finished event for the test scores (`SnowparkStore.recover`).
WRITE_ORDER = ("evaluations", "ai_usage", "ai_calls", "agent_turns", "primitives", "primitive_trials",
               "archive_entries", "ledger", "program_scores", "events", "programs")  # fmt: skip


def iteration_rows(batch: IterationBatch, now: datetime) -> dict[str, list[Row]]:
    """table -> rows for everything in `batch` except the AI cache entries (which are merged, not appended),
    in `WRITE_ORDER`."""
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
        "evaluations": [
            (run_id, s.summary.program_id, s.summary.split, r.instance_id, r.score, r.output, r.expected, r.error,
             to_json(r.observation), r.model_calls, r.input_tokens, r.output_tokens, r.latency_ms)
            for s in batch.evaluations
            for r in s.rows
        ],
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
        "archive_entries": [
            (run_id, a.iteration, a.seq, a.island, a.cell, a.program_id, a.reason) for a in batch.archive
        ],
        "ledger": [
            (run_id, e.iteration, e.program_id, e.strategy, e.kind, e.status, e.parent_score, e.child_score,
             e.score_delta, e.paradigm, e.note, now)
            for e in batch.ledger
        ],
        "events": [
            (run_id, e.iteration, e.kind, e.program_id, to_json(e.payload), now) for e in batch.events
        ],
        "programs": [
            (p.program_id, p.run_id, p.iteration, p.parent_id, p.donor_id, p.code, p.language, p.dialect, p.island,
             p.cell, p.approach, p.strategy, p.valid, p.error, now)
            for p in batch.programs
        ],
    }  # fmt: skip
    return {table: rows[table] for table in WRITE_ORDER}


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
