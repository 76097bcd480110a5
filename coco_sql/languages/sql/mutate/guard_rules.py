"""When a guard may stand: the support and significance a keyword or threshold guard needs on the training rows
(issue 38), so that a rule fitted on a few rows is a property of the data and not of the sample.

A guard `CASE WHEN <condition> THEN <label> ...` is offered only when all of these hold on the training rows,
the rows flagged as likely label errors (`label_noise`) left out:

1. support: the condition matches at least MIN_SUPPORT rows. Below 5 rows no one-sided binomial test against a
   base rate of 1/2 or more reaches even an uncorrected 0.05 (0.5^5 = 0.031), and a guard matching fewer rows
   cannot be told from chance whatever its precision;
2. significance: k of the n rows it matches hold the label, and P(Binomial(n, pi) >= k) <= ALPHA / m, where pi is
   the label's base rate on the training rows and m the number of (condition, label) candidates that reached the
   support floor in this proposal (Bonferroni's correction for the number of candidates tried: among m
   candidates with no association at all, the chance that any one passes is at most ALPHA);
3. no stop word: a keyword is refused when it is a function word of the data, not of a label. It is one when it
   appears in at least STOP_SHARE of the rows of every label that has at least MIN_SUPPORT rows (frequent in
   every label: measured on the data, so it holds in any language), or when it is in `label_words.STOPWORDS`
   (English function words: a hard-coded list alone would miss other languages and domains, the data rule alone
   would miss a function word that a small sample happens to concentrate in one label).

STOP_SHARE is 1 / (2 K) for the K labels with support, a stated rule, not a fitted one: a word spread evenly
over the labels is in the same share of each label's rows, and one in at least half of 1/K of every label's rows
is as common everywhere as the label-specific words the guards look for are in their own label (with two labels,
a quarter of each label's rows: ' the ', ' was ', ' in ', ' be ' in English text).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from coco_sql.languages.sql.mutate.label_words import STOPWORDS

MIN_SUPPORT = 5
ALPHA = 0.05


@dataclass(frozen=True)
class Support:
    """What a guard stands on: rows it matches, of those the ones with its label, the label's base rate, the
    one-sided binomial p-value, and the number of candidates it was corrected for."""

    rows: int
    hits: int
    base_rate: float
    p_value: float
    candidates: int

    @property
    def significant(self) -> bool:
        return self.rows >= MIN_SUPPORT and self.p_value <= ALPHA / max(self.candidates, 1)

    def text(self) -> str:
        """One line for the approach, the ledger and the report."""
        return (
            f"support {self.rows} rows, {self.hits} of them the label (base rate {self.base_rate:.0%}), "
            f"p = {self.p_value:.1e} <= {ALPHA}/{self.candidates}"
        )


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(Binomial(n, p) >= k), exactly (log-space sum; n is a count of training rows)."""
    if k <= 0:
        return 1.0
    if p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    total = 0.0
    for i in range(k, n + 1):
        log_term = (
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
        )
        total += math.exp(log_term)
    return min(total, 1.0)


def base_rates(golds: Sequence[Collection[str]]) -> dict[str, float]:
    """Each label's share of the rows that hold it."""
    counts: dict[str, int] = {}
    for gold in golds:
        for label in set(gold):
            counts[label] = counts.get(label, 0) + 1
    return {label: count / max(len(golds), 1) for label, count in counts.items()}


def support(hits: int, rows: int, base_rate: float, candidates: int) -> Support:
    return Support(rows, hits, base_rate, binomial_tail(hits, rows, base_rate), candidates)


def stop_words(texts: Sequence[set[str]], golds: Sequence[Collection[str]]) -> set[str]:
    """The words frequent in every label (module docstring, rule 3's data part): in at least STOP_SHARE of the
    rows of each label that has MIN_SUPPORT rows or more. `texts`: each row's set of words."""
    by_label: dict[str, list[int]] = {}
    for k, gold in enumerate(golds):
        for label in set(gold):
            by_label.setdefault(label, []).append(k)
    labels = [members for members in by_label.values() if len(members) >= MIN_SUPPORT]
    if len(labels) < 2:
        return set()
    share = 1.0 / (2 * len(labels))
    frequent: set[str] | None = None
    for members in labels:
        counts: dict[str, int] = {}
        for k in members:
            for word in texts[k]:
                counts[word] = counts.get(word, 0) + 1
        here = {w for w, c in counts.items() if c >= share * len(members)}
        frequent = here if frequent is None else frequent & here
    return frequent or set()


def refused(word: str, stops: Collection[str]) -> bool:
    """Whether keyword `word` (as matched: a bare word or ' word ') is a stop word (rule 3)."""
    bare = word.strip().lower()
    return bare in STOPWORDS or bare in stops


def significant_guards(
    candidates: Mapping[tuple[str, str], tuple[int, int]], rates: Mapping[str, float]
) -> dict[tuple[str, str], Support]:
    """{(condition, label): its Support} for the candidates (each: rows matched, rows with the label) that pass
    rules 1 and 2, corrected for all the candidates given that reach the support floor."""
    tried = [key for key, (rows, _) in candidates.items() if rows >= MIN_SUPPORT]
    found = {}
    for key in tried:
        rows, hits = candidates[key]
        checked = support(hits, rows, rates.get(key[1], 0.0), len(tried))
        if checked.significant:
            found[key] = checked
    return found


__all__ = [
    "ALPHA",
    "MIN_SUPPORT",
    "Support",
    "base_rates",
    "binomial_tail",
    "refused",
    "significant_guards",
    "stop_words",
    "support",
]
