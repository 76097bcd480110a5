"""The learned proxy's genes and their fit on the training rows (issue 15, part 2).

The proxy (`proxy_edits`) is a classifier written in SQL over embeddings and words: each row's label
probabilities are

    p(c | x) = (1 - v) [ (1 - w) softmax_c( cos(x, e_c) / tau_label )            e_c: the call's category text
                       + w sum_{i in kNN_k(x), i != x} softmax_i( cos(x, x_i) / tau ) [c in labels_i] ]
             + v softmax_c( ln n_c + sum_{u in words(x), seen} ln((n_cu + alpha) / (t_c + alpha V)) )

over the training rows in the `examples` table (the row itself left out), and it answers every label with
p >= ratio * max p. The first part is the embedded backend's AI_CLASSIFY (`engines.duckdb.ai.semantic`) with its
constants made genes: k, tau, the examples' weight w and the multi-label ratio are fitted per program here,
where the AI call's constants are fixed. The second is a naive Bayes over the rows' words (`word_probabilities`:
n_c training rows hold label c, n_cu of them the word u, t_c words in all; V the examples' vocabulary; only
words another training row has count), with weight v and smoothing alpha as genes. It reads what embeddings
blur: on hotpotqa_type a question's type is in words like "or", "both" and "same", and the words alone score
0.91 on held-out rows where the embeddings' vote scores 0.78-0.81 (204 training rows, five random splits).
Leaving a row out has to drop the words only it has, as a new row's unseen words are dropped: counted with
smoothed zero counts they favour the row's own label (its words are out of that label's total), and the fit
rated the vote-and-words mix 0.94 on the training rows where it scores 0.85 on new ones.

Measured with numpy on the embedded model (leave-one-out on the training rows picks the genes; validation and
test rows untouched by the choice): goemotions 0.411 test example F1 at the AI call's constants (k 20, tau
0.05, w 0.75, ratio 0.7), 0.418-0.424 at the fitted ones (the words add nothing there: the fit keeps v = 0).

A third part, the centroid head (`centroid_head`: each row's cosine to each label's centroid of the other
training rows, as a softmax at tau_head), gets weight h: p = (1 - h) [the above] + h head. The fit scores
it after the grid (`head_grid`: the grid's best with h in {0.25, 0.5, 0.75}, and the head alone), so it is
chosen only where it scores strictly better leave-one-out. On the packs' training rows it does: goemotions
0.436 -> 0.443 (h 0.5; the proxy alone on test 0.416 -> 0.424 in numpy), hotpotqa_type 0.926 -> 0.936.

Tried and left out: a gene that masks the names in the embedded text (every later word starting with a capital
or a digit, as ' X'). On hotpotqa_type it lifts the proxy alone from 0.82 to 0.89 test accuracy, but fitted
first it wins the fit and leaves the keyword guards that carry the task little to add (seed 1, budget 30: 0.916
test against 0.922), and as a single `tune_proxy` step on a guarded program it scores 0.758 validation.

The fit scores every point of `grid` leave-one-out on the training rows in numpy, from the same vectors the
SQL reads (the run's embedding model); the mutator then tests the SQL it writes from the chosen genes like any
other draft, so the numpy copy only has to rank the grid, not to be the truth.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
from sqlglot import exp

from coco_sql.languages.sql.mutate.ai_edits import TrainingRow
from coco_sql.languages.sql.mutate.centroid_head import centroid_cosines, head_probabilities
from coco_sql.numerics import softmax


@dataclass(frozen=True)
class ProxyGenes:
    """The proxy's parameters (module docstring), written into its SQL as the one-row CTE `proxy_params`."""

    k: int = 20
    tau: float = 0.05
    tau_label: float = 0.01
    example_weight: float = 0.75
    ratio: float = 1.0  # 1.0: the top label only (single-label contracts)
    word_weight: float = 0.0  # v: the words' naive Bayes' share of p
    alpha: float = 0.3  # its additive smoothing
    head_weight: float = 0.0  # h: the centroid head's share of p (`heads`); 1: the head alone
    tau_head: float = 0.01  # its temperature
    linear_weight: float = 0.0  # g: the learned linear head's share of p (`linear_head`); 1: the head alone

    def sql(self) -> str:
        """The `proxy_params` CTE's query; without a head its genes are not written (a proxy written before
        heads reads back the same), nor the linear head's weight when it has none."""
        names = [
            f.name
            for f in fields(self)
            if (self.head_weight > 0 or f.name not in HEAD_GENES)
            and (self.linear_weight > 0 or f.name not in LINEAR_GENES)
        ]
        return "SELECT " + ", ".join(f"{getattr(self, name)} AS {name}" for name in names)

    @classmethod
    def read(cls, query: exp.Expression) -> ProxyGenes | None:
        """The genes a `proxy_params` query holds (`sql`'s inverse), or None when it is not one."""
        found: dict[str, float] = {}
        for projection in query.expressions if isinstance(query, exp.Select) else ():
            value = projection.this if isinstance(projection, exp.Alias) else None
            if isinstance(value, exp.Literal) and value.is_number:
                found[projection.alias] = float(value.this)
        if {f.name for f in fields(cls)} - set(found) - HEAD_GENES - LINEAR_GENES:
            return None
        return cls(**{name: int(value) if name == "k" else value for name, value in found.items()})

    def neighbours(self, multi_label: bool, examples: int) -> list[ProxyGenes]:
        """The genes one step away: k and each temperature halved and doubled, the examples' weight and (for a
        multi-label task) the ratio moved by 0.1, with words alpha halved and doubled and the words' weight
        moved by 0.25, with a head its temperature halved and doubled and its weight moved by 0.25; only valid
        ones (k < examples, weights and ratios in (0, 1]) and only genes of parts the proxy has. A step never
        changes which parts the proxy has (a part's weight stays 0, 1, or between them): that changes its
        CTEs, and the fit or a head edit (`heads`) chooses it."""
        vote = [
            replace(self, k=self.k // 2),
            replace(self, k=self.k * 2),
            replace(self, tau=round(self.tau / 2, 6)),
            replace(self, tau=round(self.tau * 2, 6)),
            replace(self, tau_label=round(self.tau_label / 2, 6)),
            replace(self, tau_label=round(self.tau_label * 2, 6)),
            replace(self, example_weight=round(self.example_weight - 0.1, 6)),
            replace(self, example_weight=round(self.example_weight + 0.1, 6)),
        ]
        # the head alone, or the linear head alone: the vote's and the words' genes are moot (not written)
        base = self.head_weight < 1 and self.linear_weight < 1
        steps = vote if base and self.word_weight < 1 else []  # words alone: the vote's genes are moot
        if multi_label:
            steps += [
                replace(self, ratio=round(self.ratio - 0.1, 6)),
                replace(self, ratio=round(self.ratio + 0.1, 6)),
            ]
        if base and self.word_weight > 0:
            steps += [
                replace(self, alpha=round(self.alpha / 2, 6)),
                replace(self, alpha=round(self.alpha * 2, 6)),
            ]
        if base and 0 < self.word_weight < 1:
            steps += [
                replace(self, word_weight=round(self.word_weight - 0.25, 6)),
                replace(self, word_weight=round(self.word_weight + 0.25, 6)),
            ]
        if 0 < self.linear_weight < 1:
            steps += [
                replace(self, linear_weight=round(self.linear_weight - 0.25, 6)),
                replace(self, linear_weight=round(self.linear_weight + 0.25, 6)),
            ]
        if self.head_weight > 0 and self.linear_weight < 1:
            steps += [
                replace(self, tau_head=round(self.tau_head / 2, 6)),
                replace(self, tau_head=round(self.tau_head * 2, 6)),
            ]
        if 0 < self.head_weight < 1:
            steps += [
                replace(self, head_weight=round(self.head_weight - 0.25, 6)),
                replace(self, head_weight=round(self.head_weight + 0.25, 6)),
            ]
        return [
            g
            for g in dict.fromkeys(steps)
            if g != self
            and 1 <= g.k < max(examples, 2)
            and 0 < g.example_weight <= 1
            and 0 < g.ratio <= 1
            and (0 < g.word_weight < 1 or g.word_weight == self.word_weight)
            and (0 < g.head_weight < 1 or g.head_weight == self.head_weight)
            and (0 < g.linear_weight < 1 or g.linear_weight == self.linear_weight)
        ]


HEAD_GENES = frozenset({"head_weight", "tau_head"})
"""Genes written only when the proxy has a head."""
LINEAR_GENES = frozenset({"linear_weight"})
"""Genes written only when the proxy has the learned linear head."""
LINEAR_GRID = (
    0.25,
    0.5,
    0.75,
    1.0,
)  # the linear head's share (`languages.sql.linear_head`); 1: the head alone
K_GRID = (10, 20, 40, 80)
TAU_GRID = (0.02, 0.05)
WEIGHT_GRID = (0.5, 0.75, 0.9)
RATIO_GRID = (0.5, 0.6, 0.7, 0.8)  # multi-label only
WORD_GRID = (0.0, 0.25, 0.5, 1.0)
ALPHA_GRID = (0.1, 0.3, 1.0)
HEAD_GRID = (0.25, 0.5, 0.75, 1.0)  # the centroid head's share (`centroid_head`); 1: the head alone
TAU_HEAD_GRID = (0.005, 0.01, 0.02)
WORD_PATTERN = r"[a-z0-9']+"  # a word: what the SQL's REGEXP_SUBSTR_ALL(LOWER(text), '[a-z0-9'']+') returns


def grid(multi_label: bool, examples: int) -> list[ProxyGenes]:
    """Every point the fit scores, without words first; k at most the examples a row can have as neighbours.
    Without words alpha is moot, and with words alone (v = 1) the embeddings' genes are."""
    ks = sorted({min(k, max(examples - 1, 1)) for k in K_GRID})
    ratios = RATIO_GRID if multi_label else (1.0,)
    votes = list(itertools.product(ks, TAU_GRID, WEIGHT_GRID))
    found = []
    for v in WORD_GRID:
        for alpha in ALPHA_GRID if v > 0 else (ProxyGenes.alpha,):
            for (k, tau, w), r in itertools.product(votes if v < 1 else votes[:1], ratios):
                found.append(ProxyGenes(k=k, tau=tau, example_weight=w, ratio=r, word_weight=v, alpha=alpha))
    return found


def words(text: str) -> set[str]:
    """A text's distinct words, as the proxy's SQL splits it."""
    return set(re.findall(WORD_PATTERN, text.lower()))


def word_probabilities(texts: Sequence[str], example_labels: np.ndarray, alpha: float) -> np.ndarray:
    """The words' naive Bayes p(c | x) (module docstring) for each training row, leave-one-out: `texts` are the
    training rows, `example_labels` (n, C) their labels multi-hot. A label no training row holds gets 0."""
    vocabulary = sorted(set().union(*map(words, texts)))
    column = {word: j for j, word in enumerate(vocabulary)}
    held = np.zeros((len(texts), len(vocabulary)))
    for i, text in enumerate(texts):
        held[i, [column[w] for w in words(text)]] = 1.0
    y = example_labels
    counts = y.T @ held  # (C, V): training rows with the label and the word
    seen = held * (held.sum(axis=0) >= 2)  # a row's words that another training row has too
    # ln(n_cu + alpha) with the row's own count taken out where it holds the label (then n_cu >= 1)
    without = seen @ np.log(np.maximum(counts - 1 + alpha, 1e-300)).T
    score = np.where(y > 0, without, seen @ np.log(counts + alpha).T)
    totals = y.T @ held.sum(axis=1)  # t_c
    own = y * held.sum(axis=1, keepdims=True)
    score -= seen.sum(axis=1, keepdims=True) * np.log(totals[None, :] - own + alpha * len(vocabulary))
    score += np.log(np.maximum(y.sum(axis=0)[None, :] - y, 0.5))
    present = y.sum(axis=0) > 0
    score = np.where(present[None, :], score, -np.inf)
    return softmax(score, axis=1)


def probabilities(
    similarity: np.ndarray,
    label_similarity: np.ndarray,
    example_labels: np.ndarray,
    genes: ProxyGenes,
    by_words: np.ndarray | None = None,
    by_head: np.ndarray | None = None,
    by_linear: np.ndarray | None = None,
) -> np.ndarray:
    """p(c | x) for each row (the linear head's share g mixed last: (1 - g) [the rest] + g linear): `similarity` (n, m) to the examples, a row's own example already at -inf;
    `label_similarity` (n, C) to the categories; `example_labels` (m, C) multi-hot; `by_words` (n, C) the
    words' probabilities at the genes' alpha (`word_probabilities`; needed when word_weight > 0); `by_head`
    (n, C) the centroid head's at the genes' tau_head (`centroid_head.head_probabilities`; needed when
    head_weight > 0); `by_linear` (n, C) the linear head's out-of-fold probabilities (needed when
    linear_weight > 0)."""
    if genes.linear_weight > 0:
        if by_linear is None:
            raise ValueError("linear_weight > 0 needs the linear head's probabilities")
        if genes.linear_weight == 1:
            return by_linear
        rest = probabilities(
            similarity, label_similarity, example_labels, replace(genes, linear_weight=0.0), by_words, by_head
        )
        return (1.0 - genes.linear_weight) * rest + genes.linear_weight * by_linear
    if genes.head_weight > 0 and by_head is None:
        raise ValueError("head_weight > 0 needs the head's probabilities")
    if genes.head_weight == 1:
        return by_head  # type: ignore[return-value]
    base = _base_probabilities(similarity, label_similarity, example_labels, genes, by_words)
    return base if genes.head_weight == 0 else (1.0 - genes.head_weight) * base + genes.head_weight * by_head


def _base_probabilities(
    similarity: np.ndarray,
    label_similarity: np.ndarray,
    example_labels: np.ndarray,
    genes: ProxyGenes,
    by_words: np.ndarray | None,
) -> np.ndarray:
    """The vote and the words' p(c | x), as `probabilities` takes them."""
    by_label = softmax(label_similarity / genes.tau_label, axis=1)
    k = min(genes.k, similarity.shape[1])
    nearest = np.argpartition(-similarity, k - 1, axis=1)[:, :k]
    near = np.take_along_axis(similarity, nearest, axis=1)
    weights = np.where(np.isfinite(near), np.exp((near - 1.0) / genes.tau), 0.0)
    weights /= np.maximum(weights.sum(axis=1, keepdims=True), 1e-300)
    by_example = np.einsum("nk,nkc->nc", weights, example_labels[nearest])
    vote = (1.0 - genes.example_weight) * by_label + genes.example_weight * by_example
    if genes.word_weight == 0:
        return vote
    if by_words is None:
        raise ValueError("word_weight > 0 needs the words' probabilities")
    return (1.0 - genes.word_weight) * vote + genes.word_weight * by_words


def answers(p: np.ndarray, labels: Sequence[str], ratio: float) -> list[tuple[str, ...]]:
    """The labels each row gets: every one with p >= ratio * max p."""
    chosen = p >= ratio * p.max(axis=1, keepdims=True)
    return [tuple(labels[c] for c in np.flatnonzero(row)) for row in chosen]


def fit(
    rows: Sequence[TrainingRow],
    vectors: Mapping[str, np.ndarray],
    prototypes: np.ndarray,
    labels: Sequence[str],
    multi_label: bool,
    by_linear: np.ndarray | None = None,
) -> list[tuple[ProxyGenes, float]]:
    """Every grid point with its leave-one-out mean score on `rows` (the training rows: the `examples` table),
    best first by `FitScore.key` (ties: the grid's order), then the head's points around the best
    (`head_grid`), then, with `by_linear` (the linear head's out-of-fold p), the linear head's points
    (`linear_grid`). Empty without a vector for every row."""
    rate = fit_scores(rows, vectors, prototypes, labels, by_linear)
    if rate is None:
        return []
    rated = [(genes, rate(genes)) for genes in grid(multi_label, len(rows))]

    def best() -> ProxyGenes:  # the first of the best so far: the next part mixes into it
        return rated[min(range(len(rated)), key=lambda i: (rated[i][1].key(multi_label), i))][0]

    rated += [(genes, rate(genes)) for genes in head_grid(best(), multi_label)]
    if by_linear is not None:
        rated += [(genes, rate(genes)) for genes in linear_grid(best(), multi_label)]
    order = sorted(range(len(rated)), key=lambda i: (rated[i][1].key(multi_label), i))
    return [(rated[i][0], rated[i][1].score) for i in order]


@dataclass(frozen=True)
class FitScore:
    """How a proxy's leave-one-out p rates on the training rows: `score`, the mean per-row set F1 of its answers
    (accuracy for one label per row), and `brier`, the mean squared distance of p to the row's labels spread
    evenly over them (a proper scoring rule: it rates the probabilities, not only the top answer).

    The fit ranks by `key`. One label per row: Brier first. Accuracy moves by whole rows: on 122 training rows
    dozens of grid points tie at the top and the first of equals is an arbitrary pick, while Brier sees how sure
    each answer is. Measured (numpy, embedded model; the fit's first choice on validation / test rows):
    dialog_topics on the one-table path's split 0.870 / 0.876 by accuracy, 0.902 / 0.909 by Brier; on the
    pack's split 0.959 / 0.917 and 0.951 / 0.926; hotpotqa_type 0.914 / 0.918 and 0.929 / 0.940. Several
    labels per row: the score first, since the ratio gene decides the answer set and Brier does not see it."""

    score: float
    brier: float

    def key(self, multi_label: bool) -> tuple[float, float]:
        """Smaller ranks first (class docstring)."""
        return (-self.score, self.brier) if multi_label else (self.brier, -self.score)


def scorer(
    rows: Sequence[TrainingRow],
    vectors: Mapping[str, np.ndarray],
    prototypes: np.ndarray,
    labels: Sequence[str],
    by_linear: np.ndarray | None = None,
) -> Callable[[ProxyGenes], float] | None:
    """The leave-one-out mean score on `rows` of any genes (`fit_scores`' `score`), or None without a vector for
    every row."""
    rate = fit_scores(rows, vectors, prototypes, labels, by_linear)
    return None if rate is None else (lambda genes: rate(genes).score)


def fit_scores(
    rows: Sequence[TrainingRow],
    vectors: Mapping[str, np.ndarray],
    prototypes: np.ndarray,
    labels: Sequence[str],
    by_linear: np.ndarray | None = None,
) -> Callable[[ProxyGenes], FitScore] | None:
    """The leave-one-out `FitScore` on `rows` of any genes, or None without a vector for every row.
    `by_linear`: the linear head's out-of-fold p on `rows` (None: genes with it are not scored)."""
    if not rows or any(r.text not in vectors for r in rows):
        return None
    x = np.stack([vectors[r.text] for r in rows])
    similarity = x @ x.T
    np.fill_diagonal(similarity, -np.inf)
    index = {label: c for c, label in enumerate(labels)}
    example_labels = np.zeros((len(rows), len(labels)))
    for i, row in enumerate(rows):
        for label in row.gold:
            if label in index:
                example_labels[i, index[label]] = 1.0
    label_similarity = x @ prototypes.T
    texts = [r.text for r in rows]
    by_words = {alpha: word_probabilities(texts, example_labels, alpha) for alpha in ALPHA_GRID}
    cosines = centroid_cosines(x @ x.T, example_labels)
    by_head: dict[float, np.ndarray] = {}
    gold = example_labels > 0
    gold_sizes = np.array([len(set(r.gold)) for r in rows])  # labels outside the categories count as misses
    target = example_labels / np.maximum(example_labels.sum(axis=1, keepdims=True), 1.0)

    def rate(genes: ProxyGenes) -> FitScore:
        if genes.alpha not in by_words:
            by_words[genes.alpha] = word_probabilities(texts, example_labels, genes.alpha)
        if genes.tau_head not in by_head:
            by_head[genes.tau_head] = head_probabilities(cosines, genes.tau_head)
        p = probabilities(
            similarity,
            label_similarity,
            example_labels,
            genes,
            by_words[genes.alpha],
            by_head[genes.tau_head],
            by_linear,
        )
        chosen = p >= genes.ratio * p.max(axis=1, keepdims=True)  # `answers`, as a mask
        hits = (chosen & gold).sum(axis=1)
        sizes = chosen.sum(axis=1) + gold_sizes
        f1 = np.where(sizes > 0, 2 * hits / np.maximum(sizes, 1), 1.0)  # `set_f1`, row by row
        return FitScore(float(f1.mean()), float(((p - target) ** 2).sum(axis=1).mean()))

    return rate


def head_grid(base: ProxyGenes, multi_label: bool) -> list[ProxyGenes]:
    """The head's points, after the grid's (ties go to a proxy without a head): `base` (the grid's best) with
    the head mixed in, and the head alone (its other genes moot, at their defaults). No mix into the words
    alone: the vote's categories are the frame a mixed p is written over."""
    ratios = RATIO_GRID if multi_label else (1.0,)
    shares = [h for h in HEAD_GRID if h == 1 or base.word_weight < 1]
    found = []
    for h, tau, r in itertools.product(shares, TAU_HEAD_GRID, ratios):
        start = base if h < 1 else ProxyGenes()
        found.append(replace(start, ratio=r, head_weight=h, tau_head=tau))
    return found


def linear_grid(base: ProxyGenes, multi_label: bool) -> list[ProxyGenes]:
    """The linear head's points: mixed into `base` (the best so far), into the words alone and into the centroid
    head alone (neither needs the categories' embeddings, and with the training rows' vectors stored, none
    embeds anything but the row: `cheap`), and the linear head alone."""
    ratios = RATIO_GRID if multi_label else (1.0,)
    starts = [base, *(ProxyGenes(word_weight=1.0, alpha=a) for a in ALPHA_GRID)]
    starts += [ProxyGenes(head_weight=1.0, tau_head=t) for t in TAU_HEAD_GRID]
    found = []
    for g, r in itertools.product(LINEAR_GRID, ratios):
        if g == 1:
            found.append(ProxyGenes(ratio=r, linear_weight=1.0))
            continue
        for start in starts:
            found.append(replace(start, ratio=r, linear_weight=g))
    return list(dict.fromkeys(found))


def plain_name(genes: ProxyGenes) -> str | None:
    """'linear' for the linear head alone, 'centroid' for the centroid head alone (a plain classifier over the
    embeddings, `plain_heads`), else None."""
    if genes.linear_weight == 1:
        return "linear"
    return "centroid" if genes.head_weight == 1 and genes.linear_weight == 0 else None


def cheap(genes: ProxyGenes) -> bool:
    """Whether a proxy with `genes` (and the training rows' vectors stored, `languages.sql.linear_head`) embeds
    nothing but the row it answers: no vote, whose label part embeds the categories on every query. Its vote's
    share (1 - g)(1 - h)(1 - v) is 0: the linear head alone, the centroid head alone, the words alone, or any
    of them mixed with the linear head. Such proxies cost the same per row deployed, so the champion rule
    (cheapest within one standard error of the best) chooses among them by score."""
    return genes.linear_weight == 1 or genes.head_weight == 1 or genes.word_weight == 1


__all__ = [
    "FitScore",
    "ProxyGenes",
    "answers",
    "cheap",
    "fit",
    "fit_scores",
    "grid",
    "head_grid",
    "linear_grid",
    "plain_name",
    "probabilities",
    "scorer",
    "word_probabilities",
    "words",
]
