"""Build tasks/dialog_topics from the chatterbot-corpus wheel (BSD-3-Clause, Gunther Cox), issue 38.

    pip download --no-deps chatterbot-corpus==1.3.3 -d /tmp/cc && python scripts/make_dialog_topics.py /tmp/cc/*.whl

Each conversation's first line is a text; its file's category is the label. Five English categories with at
least 40 distinct first lines are kept (ai, coding, emotion, psychology, trivia); lines shorter than 8
characters and case-insensitive duplicates are dropped, trivia is capped at 100 lines; then per label a seeded
shuffle (numpy default_rng(38)) puts a third of the rows in data/test.csv and the rest in data/pool.csv.
"""

from __future__ import annotations

import csv
import sys
import zipfile
from pathlib import Path

import numpy as np
import yaml

FILES = {"ai": "ai.yml", "coding": "coding.yml", "emotion": "emotion.yml", "psychology": "psychology.yml",
         "trivia": "trivia.yml"}  # fmt: skip
CAP = 100
PACK = Path(__file__).resolve().parents[1] / "tasks" / "dialog_topics"


def main(wheel: str) -> None:
    seen: set[str] = set()
    pool, test = [], []
    rng = np.random.default_rng(38)
    with zipfile.ZipFile(wheel) as archive:
        for label, name in FILES.items():
            doc = yaml.safe_load(archive.read(f"chatterbot_corpus/data/english/{name}"))
            texts = []
            for conversation in doc["conversations"]:
                text = " ".join(str(conversation[0]).split())
                if len(text) < 8 or text.lower() in seen:
                    continue
                seen.add(text.lower())
                texts.append(text)
            texts = texts[:CAP]
            order = rng.permutation(len(texts))
            cut = len(texts) // 3
            for rank, k in enumerate(order):
                row = (f"{label[:2]}{int(k):03d}", texts[int(k)], label)
                (test if rank < cut else pool).append(row)
    (PACK / "data").mkdir(parents=True, exist_ok=True)
    for path, rows in (("pool.csv", pool), ("test.csv", test)):
        with (PACK / "data" / path).open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["id", "text", "label"])
            writer.writerows(sorted(rows))
    print(f"pool {len(pool)} rows, test {len(test)} rows")


if __name__ == "__main__":
    main(sys.argv[1])
