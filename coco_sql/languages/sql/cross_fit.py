"""Honest training scores: rows a program holds as few-shot examples are predicted out of fold (issue 15, part 4).

A program whose AI_CLASSIFY calls carry training rows as examples grades those rows against themselves: with
every training row an example its stored train score is about 1.0, which misleads the parent policies (the l_p
roster and the islands read per-row train scores), InfoGain's targets and anyone reading `program_scores`. So
the loop stores the training outcome the offline mutator scores its drafts with
(`languages.sql.mutate.ai_pipeline.cross_fitted`): each row whose text is an example is predicted by a variant of the program
without that row's fold of examples; every other row keeps the program's own prediction.

Scope: SQL programs on the whole training split (the SQL kind's `CrossFit`; `engine.cross_fit` asks the kind). Validation and test rows are never examples, so their scores
are the program's own; a minibatch sample is scored as it stands (it is compared with its parent's sample, and
the whole split is cross-fitted once the child passes the gate). A program without examples costs nothing
extra; one with examples costs a probe per call and two runs over the training rows, whose AI usage the loop
books with the mutator's drafts.
"""

from __future__ import annotations

from sqlglot import exp

from coco_sql.errors import CandidateRejected
from coco_sql.evaluate import Outcome
from coco_sql.languages.sql.mutate.ai_edits import classify_calls, read_spec
from coco_sql.languages.sql.mutate.ai_pipeline import cross_fitted, training_views
from coco_sql.languages.sql.mutate.proxy_edits import written_proxy
from coco_sql.reflect.environment import DraftEnvironment
from coco_sql.sqlkit.checks import ValidationSpec
from coco_sql.sqlkit.validate import parse_program

TRAIN = "train"


def holds_examples(query: exp.Expression) -> bool:
    """Whether any AI_CLASSIFY call of `query` carries few-shot examples."""
    return any(
        (spec := read_spec(call)) is not None and spec.example_inputs for call in classify_calls(query)
    )


def cross_fitted_train(env: DraftEnvironment, code: str, outcome: Outcome) -> Outcome:
    """`outcome` (the program's own, on every training row: never a sample) with its example rows predicted out
    of fold.

    Returns `outcome` itself when there is nothing to cross-fit: another split, a failed run, a program that
    does not parse, or one without examples."""
    if outcome.split != TRAIN or not outcome.ok:
        return outcome
    try:
        query = parse_program(
            code, ValidationSpec(input_columns={}, output_column=env.output_column, dialect=env.dialect)
        )
    except CandidateRejected:
        return outcome
    if not holds_examples(query):
        return outcome
    views = training_views(query, env, outcome)
    texts = {row.instance_id: row.text for view in views.values() for row in view.rows}
    return cross_fitted(query, env, texts, full=outcome, proxy=written_proxy(code, env.dialect))


__all__ = ["cross_fitted_train", "holds_examples"]
