"""The run's end: the seed and the champion scored on the test split (reports only), and the run's summary.

The test split is reached here only, by a report evaluator of its own (the search's evaluator cannot reach it),
which shares the run's AI runtime and so its warm cache. Scores already written (a resume of a finished run) are
not computed again.
"""

from __future__ import annotations

from coco_sql.engine.config import RunSummary
from coco_sql.engine.label_errors import label_errors
from coco_sql.engine.run_state import RunState
from coco_sql.engine.stages.account import ai_rows
from coco_sql.evaluate import REPORT_SPLITS, Evaluator
from coco_sql.languages import Language
from coco_sql.llm.runtime import AiRuntime
from coco_sql.store import Event, IterationBatch, RunRecord, Warehouse, program_id_for
from coco_sql.tasks import TaskPack


def finish(
    store: Warehouse,
    task: TaskPack,
    run: RunRecord,
    state: RunState,
    ai: AiRuntime | None,
    language: Language | None,
    ended: str | None = None,
) -> RunSummary:
    """Score the seed and the champion on the test split and mark the run finished; `ended` says why it ended
    before its budget (no parent left), in the `run_finished` event and the summary."""
    seed_id = program_id_for(run.run_id, 0)
    champion_id = state.champion_id()
    test_scores = store.program_scores(run.run_id, "test")
    pending = [pid for pid in dict.fromkeys((seed_id, champion_id)) if pid not in test_scores]
    if pending or store.get_run(run.run_id).status != "finished":
        reporter = Evaluator(task, REPORT_SPLITS, ai=ai, language=language)
        try:
            evaluations = tuple(
                reporter.evaluate(state.programs[pid].code, "test", warm=True).as_split_evaluation(pid)
                for pid in pending
            )
            rows = ai_rows(reporter.ai, None)
        finally:
            reporter.close()
        finished = Event(
            state.last_iteration,
            "run_finished",
            champion_id,
            {"champion_val_score": state.val_scores[champion_id], "ended": ended},
        )
        store.write_iteration(
            IterationBatch(
                run.run_id,
                state.last_iteration,
                evaluations=evaluations,
                events=(finished,),
                finish_run=True,
                label_errors=label_errors(task, state, ai),
                **rows,
            )
        )
    return summary(store, task, run, state, ended)


def summary(
    store: Warehouse, task: TaskPack, run: RunRecord, state: RunState, stopped: str | None = None
) -> RunSummary:
    """The run as its tables hold it now: the champion, and the test scores once they are reported."""
    seed_id = program_id_for(run.run_id, 0)
    choice = state.choice()
    assert choice is not None, "the seed is valid: there is always a champion"
    champion_id, best_id = choice.champion.program_id, choice.best.program_id
    test_scores = store.program_scores(run.run_id, "test")
    return RunSummary(
        run_id=run.run_id,
        task=task.name,
        iterations=state.last_iteration,
        champion_id=champion_id,
        seed_val_score=state.val_scores[seed_id],
        champion_val_score=state.val_scores[champion_id],
        seed_test_score=test_scores[seed_id].score if seed_id in test_scores else None,
        champion_test_score=test_scores[champion_id].score if champion_id in test_scores else None,
        best_id=best_id,
        best_val_score=state.val_scores[best_id],
        stopped=stopped,
    )
