"""The proxy tests' shared setting: a 120-row hotpotqa_type copy and a seed whose AI_CLASSIFY call carries 20
examples (enough for the proxy), with its training view and the rows' embeddings."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import sqlglot
from pack_copies import small_pack

from coco_sql.evaluate import Evaluator
from coco_sql.languages.sql.linear_head import embed_model
from coco_sql.languages.sql.mutate.ai_edits import TrainingView
from coco_sql.languages.sql.mutate.ai_pipeline import embeddings, training_views
from coco_sql.reflect import DraftEnvironment
from coco_sql.tasks import load_task

SHOTS = ", ".join(f"{{'input': 'Who is older, A{i} or B?', 'labels': ['comparison']}}" for i in range(20))
SEED = (
    f"SELECT id, AI_CLASSIFY(question, ['bridge', 'comparison'], {{'examples': [{SHOTS}]}}):labels[0]::string "
    "AS label FROM input"
)
MODEL = embed_model("snowflake")  # the model a Snowflake program names (Cortex's)


def proxy_setting(root: Path) -> Iterator[tuple[Any, Evaluator, DraftEnvironment, Any, TrainingView]]:
    """(pack, evaluator, draft environment, the parsed seed, its training view with vectors); closes the
    evaluator after."""
    pack = load_task(small_pack(root, "hotpotqa_type", pool_rows=120))
    evaluator = Evaluator(pack)
    env = DraftEnvironment(evaluator)
    query = sqlglot.parse_one(SEED, read="snowflake")
    views = training_views(query, env, env.test_draft(SEED))
    vectors = embeddings(env, views)
    view = TrainingView(views[0].rows, views[0].input_sql, views[0].scope_sql, vectors=vectors)
    yield pack, evaluator, env, query, view
    evaluator.close()
