"""A small labelled text set made here: four topics written from templates, as a task pack on disk (issue 38's
tests: planted label errors, the linear head). Real embedded model, real DuckDB sandbox."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

TOPICS = {
    "sports": (
        [
            "The {a} beat the {b} {n} to {m} in a tense {g} on {d}.",
            "Our {g} coach said the {a} trained hard for the {b} match.",
            "A late goal gave the {a} the {g} title against the {b}.",
            "Fans of the {a} cheered as the striker scored twice in the {g}.",
        ],
        ["Rovers", "United", "Tigers", "Eagles", "Wanderers", "Rangers"],
        ["league", "cup", "derby", "final"],
    ),
    "cooking": (
        [
            "Simmer the {a} with {b} for {n} minutes before adding the {g}.",
            "This {g} recipe needs fresh {a} and a pinch of {b}.",
            "Bake the {a} at {n}0 degrees and serve it with warm {b}.",
            "Chop the {a}, fry it in butter and stir in the {b} {g}.",
        ],
        ["onions", "garlic", "tomatoes", "mushrooms", "carrots", "basil"],
        ["sauce", "soup", "stew", "pie"],
    ),
    "finance": (
        [
            "Shares of {a} fell {n} percent after the {g} report on {d}.",
            "The central bank raised interest rates to curb {g} inflation at {a}.",
            "Investors sold {a} bonds as the {g} market dropped {n} points.",
            "Quarterly earnings at {a} beat analysts' {g} forecasts by {n} cents.",
        ],
        ["Acme Corp", "Globex", "Initech", "Umbrella", "Stark Industries", "Wayne Holdings"],
        ["stock", "bond", "currency", "credit"],
    ),
    "weather": (
        [
            "Heavy {g} is expected on {d} with winds up to {n}0 km/h near {a}.",
            "Forecasters warn of {g} and falling temperatures across {a}.",
            "A storm front will bring {g} to {a} and {b} by {d} evening.",
            "Skies clear after the {g} and the weekend looks sunny in {a}.",
        ],
        ["the coast", "the valley", "the north", "the mountains", "the islands", "the plains"],
        ["rain", "snow", "hail", "fog"],
    ),
}
DAYS = ["Monday", "Tuesday", "Friday", "Saturday", "Sunday"]


def topic_rows(per_topic: int, seed: int = 0) -> list[tuple[str, str, str]]:
    """(id, text, topic) rows, `per_topic` of each topic, texts from the templates with drawn fillers."""
    rng = np.random.default_rng(seed)
    rows = []
    for topic, (templates, names, things) in TOPICS.items():
        for k in range(per_topic):
            template = templates[k % len(templates)]
            a, b = rng.choice(names, size=2, replace=False)
            text = template.format(
                a=a,
                b=b,
                g=rng.choice(things),
                n=int(rng.integers(2, 9)),
                m=int(rng.integers(0, 2)),
                d=rng.choice(DAYS),
            )
            rows.append((f"{topic[:2]}{k:03d}", text, topic))
    return rows


def topics_pack(
    root: Path, per_topic: int = 30, planted: int = 0, seed: int = 0
) -> tuple[Path, dict[str, str]]:
    """A pack of `topic_rows` under `root` (half of the pool for training), with `planted` training rows' topics
    flipped to the next topic: the pack's directory and {id: true topic} of the planted rows."""
    from coco_sql.tasks import load_task

    rows = topic_rows(per_topic, seed)
    root = root / "topics4"
    pack = _write(root, rows)
    train = sorted(str(i) for i in load_task(str(pack)).split("train").expected)
    names = list(TOPICS)
    chosen = [
        train[int(i)]
        for i in sorted(np.random.default_rng(seed + 1).choice(len(train), planted, replace=False))
    ]
    truth = {i: t for i, _, t in rows if i in chosen}
    flipped = [
        (i, text, names[(names.index(t) + 1) % len(names)] if i in truth else t) for i, text, t in rows
    ]
    return _write(root, flipped), truth


def _write(root: Path, rows: list[tuple[str, str, str]]) -> Path:
    (root / "data").mkdir(parents=True, exist_ok=True)
    with (root / "data" / "pool.csv").open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "text", "label"])
        writer.writerows(rows)
    categories = ", ".join(f"'{t}'" for t in TOPICS)
    (root / "seed.sql").write_text(
        f"SELECT id, AI_CLASSIFY(text, [{categories}]):labels[0]::string AS label FROM input\n",
        encoding="utf-8",
    )
    (root / "task.toml").write_text(
        """name = "topics4"
description = "Four topics written from templates (a test set)."
dialect = "snowflake"

[data]
pool = "data/pool.csv"
id_column = "id"
expected_column = "label"

[data.input_columns]
text = "VARCHAR"

[splits]
seed = 7
mode = "partition"
train_fraction = 0.5
test_fraction = 0.25

[contract]
output = "label"
type = "VARCHAR"

[scorer]
kind = "exact"

[program]
seed = "seed.sql"
allowed_functions = ["AI_CLASSIFY", "AI_SIMILARITY", "AI_EMBED"]
timeout_seconds = 120.0
""",
        encoding="utf-8",
    )
    return root
