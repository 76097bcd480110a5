"""AI-pipeline edits: literal round trips, mining by hand, and the offline mutator improving a real AI_CLASSIFY
pipeline on a small goemotions pack (real embedded model, real DuckDB)."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlglot

from coco_sql.engine import iteration_rng
from coco_sql.evaluate import Evaluator
from coco_sql.languages.sql.mutate.ai_edits import (
    TrainingRow,
    TrainingView,
    ai_edits,
    classify_calls,
    confusions,
    guard_candidates,
    read_spec,
)
from coco_sql.languages.sql.mutate.offline import OfflineMutator
from coco_sql.mutate import MutationRequest, ProgramView
from coco_sql.reflect import DraftEnvironment
from coco_sql.sqlkit.literals import to_node, to_python
from coco_sql.tasks import load_task
from tests.test_ai_runs import small_goemotions

CALL = """SELECT id, AI_CLASSIFY(text, ['yes', {'label': 'no', 'description': 'a refusal'}],
                               {'output_mode': 'multi', 'examples': [{'input': 'sure', 'labels': ['yes']}]}) AS out
          FROM input"""


def rows(*items: tuple[str, str, str]) -> tuple[TrainingRow, ...]:
    return tuple(TrainingRow(f"r{i}", text, (gold,), (pred,)) for i, (text, gold, pred) in enumerate(items))


def test_literal_arguments_round_trip() -> None:
    query = sqlglot.parse_one(CALL, read="snowflake")
    spec = read_spec(classify_calls(query)[0])
    assert spec is not None
    assert spec.labels == ["yes", "no"]
    assert spec.config == {"output_mode": "multi", "examples": [{"input": "sure", "labels": ["yes"]}]}
    assert spec.example_inputs == {"sure"}
    assert to_python(to_node(spec.config)) == spec.config
    dynamic = sqlglot.parse_one("SELECT AI_CLASSIFY(text, labels_column) FROM input", read="snowflake")
    assert read_spec(classify_calls(dynamic)[0]) is None  # not literal: never edited


def test_guard_candidates_need_support_significance_and_no_stop_word() -> None:
    """`guard_rules`: a keyword guard stands on 5+ rows, passes a Bonferroni-corrected binomial test against its
    label's base rate, and is no stop word (English function words, or words frequent in every label)."""
    comparison = [(f"Is Xa{i} or Yb{i} older than the other one?", "comparison", "bridge") for i in range(8)]
    bridge = [(f"Who wrote the novel the film {i} was based on?", "bridge", "bridge") for i in range(24)]
    few = [(f"Which lighthouse {i} stands taller?", "comparison", "bridge") for i in range(4)]
    found = guard_candidates(rows(*comparison, *bridge, *few), ["bridge", "comparison"])
    patterns = {pattern: (label, stands) for pattern, label, stands, _ in found}
    assert "older" in patterns and patterns["older"][0] == "comparison"
    stands = patterns["older"][1]
    assert (stands.rows, stands.hits, round(stands.base_rate, 3)) == (8, 8, 0.333)
    assert stands.significant and stands.p_value <= 0.05 / stands.candidates
    assert (
        " or " not in patterns and " the " not in patterns
    )  # stop words: the list, and frequent in every label
    assert "lighthouse" not in patterns and "taller" not in patterns  # 4 rows: below the support floor
    assert all(label != "bridge" for label, _ in patterns.values())  # bridge gains nothing: the parent has it


def test_a_word_frequent_in_every_label_is_a_stop_word_whatever_the_language() -> None:
    from coco_sql.languages.sql.mutate.guard_rules import stop_words

    texts = [{"och", f"katt{i}"} for i in range(10)] + [{"och", f"hund{i}"} for i in range(10)]
    golds = [("a",)] * 10 + [("b",)] * 10
    assert stop_words(texts, golds) == {"och"}  # Swedish 'and': in every row of both labels


def test_confusions_count_missed_labels() -> None:
    view = rows(("a", "x", "y"), ("b", "x", "y"), ("c", "y", "y"), ("d", "z", "x"))
    assert confusions(view) == [("x", "y", 2), ("z", "x", 1)]


def test_edits_cover_few_shot_descriptions_mode_and_guards() -> None:
    query = sqlglot.parse_one(CALL, read="snowflake")
    view = TrainingView(
        rows(
            ("sure thing", "yes", "no"),
            ("no way", "no", "yes"),
            *((f"never {i}", "no", "yes") for i in range(10)),
            *((f"sure {i}", "yes", "yes") for i in range(10)),
        ),
        "text",
    )
    edits = ai_edits(query, {0: view}, targets=["r1"])
    operators = {e.operator for e in edits}
    assert {"few_shot", "output_mode", "keyword_guard"} <= operators
    child = next(e for e in edits if e.operator == "keyword_guard").apply(query)
    assert "ILIKE" in child.sql("snowflake") and "PARSE_JSON" in child.sql("snowflake")
    few = next(e for e in edits if e.operator == "few_shot" and "targeted" in e.description).apply(query)
    assert read_spec(classify_calls(few)[0]).example_inputs == {"sure", "no way"}


@pytest.mark.slow
def test_offline_mutator_improves_a_real_ai_pipeline(tmp_path: Path) -> None:
    task = load_task(small_goemotions(tmp_path, pool_rows=90, test_rows=10))
    evaluator = Evaluator(task)
    env = DraftEnvironment(evaluator)
    parent = ProgramView("1-0", task.seed_program, 0.0)
    proposal = OfflineMutator(max_drafts=8).propose(MutationRequest(1, parent, env), iteration_rng(0, 1, 1))
    assert proposal.notes["cross_fitted"] and proposal.notes["drafts_tested"] >= 3
    assert proposal.notes["child_train_score"] > proposal.notes["parent_train_score"]
    assert evaluator.evaluate(proposal.code, "val").score > evaluator.evaluate(task.seed_program, "val").score
    evaluator.close()


def test_similarity_threshold_is_tuned_on_the_training_rows() -> None:
    from coco_sql.languages.sql.mutate.ai_edits import similarity_thresholds

    top = [(f"t{i}", "x", "y") for i in range(6)]  # the six most similar rows: x, predicted y (+1 each)
    rest = [(f"u{i}", "y", "y") for i in range(14)]  # then y rows the parent has right (-1 each if guarded)
    view = rows(*top, *rest)
    similarity = {f"r{i}": 1.0 - i / 40 for i in range(20)}
    threshold, stands, gain = similarity_thresholds(view, "x", similarity)
    assert (round(threshold, 4), stands.rows, stands.hits, gain) == (0.8625, 6, 6, 6.0)
    assert stands.significant
    assert similarity_thresholds(view, "y", similarity) is None  # answering y nowhere gains
    small = rows(*top[:4], *rest)  # four rows above the cut: below the support floor
    assert similarity_thresholds(small, "x", {f"r{i}": 1.0 - i / 40 for i in range(18)}) is None


def test_examples_that_their_neighbours_contradict_can_be_pruned() -> None:
    query = sqlglot.parse_one(CALL, read="snowflake")  # one example: 'sure' -> yes
    view = TrainingView(rows(("sure", "yes", "no"), ("ok", "yes", "yes")), "text")
    prune = [e for e in ai_edits(query, {0: view}, targets=[]) if e.operator == "prune_examples"]
    assert len(prune) == 1 and "drop 1 examples" in prune[0].description
    assert read_spec(classify_calls(prune[0].apply(query))[0]).example_inputs == set()
    agreeing = TrainingView(rows(("sure", "yes", "yes")), "text")
    assert not [e for e in ai_edits(query, {0: agreeing}, targets=[]) if e.operator == "prune_examples"]
