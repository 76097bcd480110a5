"""The words that tell one label's training texts from the others (smoothed log-odds over word sets, stopwords
left out): the offline mutator writes them into a category's description when AI_CLASSIFY misses that label."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Protocol

MAX_DESCRIPTION_WORDS = 6


class LabelledText(Protocol):
    """A training row as this module reads it (`ai_edits.TrainingRow` is one)."""

    @property
    def text(self) -> str: ...

    @property
    def gold(self) -> tuple[str, ...]: ...


STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "of",
        "to",
        "in",
        "on",
        "for",
        "with",
        "at",
        "by",
        "from",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "it",
        "this",
        "that",
        "i",
        "you",
        "he",
        "she",
        "we",
        "they",
        "me",
        "my",
        "your",
        "our",
        "their",
        "his",
        "her",
        "its",
        "not",
        "no",
        "so",
        "just",
        "do",
        "does",
        "did",
        "have",
        "has",
        "had",
        "as",
        "what",
        "who",
        "how",
        "all",
        "can",
        "will",
        "would",
        "could",
        "should",
        "about",
        "there",
        "here",
        "then",
        "than",
        "them",
        "too",
        "very",
        "get",
        "got",
        "im",
        "dont",
        "its",
        "thats",
    ]
)


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z']{3,}", text.lower()) if w not in STOPWORDS}


def distinctive_words(
    rows: Sequence[LabelledText], label: str, limit: int = MAX_DESCRIPTION_WORDS
) -> list[str]:
    """Words most over-represented in `label`'s rows (smoothed log-odds, at least two rows)."""
    inside = Counter(w for r in rows if label in r.gold for w in _words(r.text))
    outside = Counter(w for r in rows if label not in r.gold for w in _words(r.text))
    n_in = max(1, sum(1 for r in rows if label in r.gold))
    n_out = max(1, len(rows) - n_in)
    scored = [
        (math.log((inside[w] + 0.5) / n_in) - math.log((outside[w] + 0.5) / n_out), w)
        for w in inside
        if inside[w] >= 2
    ]
    return [w for _, w in sorted(scored, key=lambda s: (-s[0], s[1]))[:limit]]
