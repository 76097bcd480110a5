"""InfoGain's kernel without an N×N matrix: each row's k nearest rows, and its mean kappa (Appendix C.3).

kappa(t, t') is the cosine of the character 3-gram count vectors of the two rows' input texts (each text padded
with one space at both ends); the vectors have no negative entry, so kappa lies in [0, 1], and kappa(t, t) = 1.
InfoGain needs two things of kappa: for every row t the rows most similar to it (the kappa^4-weighted surrogate)
and the mean of kappa(t, t') over all rows t' (the transfer term). `Neighbours` holds both in O(N·k) memory.
The N×N matrix is never formed and no dense BLAS product is called: `A @ A.T` on a 16,000×1,200 float64 array
segfaults in this machine's OpenBLAS with 2 threads (issue 12), and an N×N matrix is 40-60 GB at 50,000 rows.

How they are computed (deterministic: fixed hash constants, stable sorts, no clock seed):

1. Each text becomes a row of a sparse matrix X (scipy CSR, float32) of its 3-gram counts scaled to unit
   length, so kappa(t, t') = X[t] · X[t'] exactly. Cost O(total characters), memory O(N·g) for g 3-grams per
   row.
2. The mean is exact, for any N: mean_{t'} kappa(t, t') = X[t] · m with m = (1/N) sum_{t'} X[t'], two sparse
   matrix-vector products, O(N·g).
3. Below `exact_below` rows (4,096 by default) every pair is compared, by sparse products X[B] @ X.T over
   blocks B of rows (scipy's sparse kernel, not BLAS), keeping the top k of each row: the neighbours are
   exact. Cost O(N²) time (under a second at 4,096 short texts), O(block · N) memory.
4. From `exact_below` rows up, candidates come from an LSH forest over the 3-gram SETS (MinHash: P[h(t) =
   h(t')] is the Jaccard similarity of the two sets). Each of `trees` trees sorts the rows by `depth` MinHash
   values of its own, the first as the primary key, so rows that agree on a prefix of them end up close
   together; rows tied on the whole prefix (the same text, say) follow in an order of the tree's own (a hash
   of the row number), so a group of identical rows larger than the window shows each row different members
   in different trees. The candidates of a row are the `window` rows on either side of it in each tree's
   order; every candidate pair gets its exact cosine from X, and each row keeps the k best it has met so far.
   Cost per tree: one sort, O(N log N), and N·window exact cosines, O(N · window · g); memory O(N·k) for the
   running top k plus O(N·window) for one tree's cosines. A true neighbour is missed only if no tree puts
   the two rows within `window` of each other: rare for rows that share most of their 3-grams (the ones
   kappa^4 weighs), more common for long texts whose nearest rows share only common 3-grams (kappa ~ 0.4,
   kappa^4 ~ 0.03). `bench/bench_infogain.py` measures the recall against the exact top k.

`Neighbours.index` and `.weight` have k + 1 columns per row: column 0 is the row itself with weight 1, then its
neighbours by decreasing kappa (ties by row number). A slot no similar row fills (a row that shares a 3-gram
with fewer than k others, or a pool of at most k rows) holds the row's own index with weight 0: every index
is valid, and weight-0 slots add nothing to a kappa-weighted sum.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import scipy.sparse as sp

K = 32
EXACT_BELOW = 4096
TREES = 16
DEPTH = 3
WINDOW = 16
BLOCK_ROWS = 1 << 15  # rows per block when merging candidates: bounds the temporaries to a few MB per column
EXACT_BLOCK_CELLS = 1 << 22  # block rows x N cells of one exact sparse product block (16 MB of float32)
EMPTY = np.uint64(0xFFFFFFFFFFFFFFFF)  # a `_key` that sorts after every neighbour
PAIR_CELLS = 1 << 22  # 3-gram entries per chunk of pairwise cosines (tens of MB of temporaries)


@dataclass(frozen=True)
class Neighbours:
    """index[t, j], weight[t, j]: row t's j-th nearest row and kappa(t, that row), column 0 being t itself
    (weight 1); mean_kappa[t]: the mean of kappa(t, t') over ALL N rows t', t itself included."""

    index: np.ndarray  # int32, (N, k + 1)
    weight: np.ndarray  # float32, (N, k + 1), in [0, 1]
    mean_kappa: np.ndarray  # float64, (N,), in [0, 1]

    def __post_init__(self) -> None:
        if self.index.shape != self.weight.shape or self.index.ndim != 2 or self.index.shape[1] < 1:
            raise ValueError("index and weight must both have shape (rows, k + 1)")
        if self.mean_kappa.shape != (self.index.shape[0],):
            raise ValueError("mean_kappa must have one value per row")

    def __len__(self) -> int:
        return self.index.shape[0]

    @property
    def k(self) -> int:
        return self.index.shape[1] - 1


def gram_matrix(texts: Sequence[str], n: int = 3) -> sp.csr_matrix:
    """X: character n-gram counts of each padded text, rows scaled to unit length (float32, sorted indices)."""
    import scipy.sparse as sp  # ~0.5 s of import, paid only by a run that ranks rows

    vocabulary: dict[str, int] = {}
    ids = array("i")  # compact: a list of Python ints would take ~36 bytes per 3-gram
    indptr = array("q", [0])
    for text in texts:
        padded = f" {text} "
        ids.extend(
            vocabulary.setdefault(padded[i : i + n], len(vocabulary))
            for i in range(max(1, len(padded) - n + 1))
        )
        indptr.append(len(ids))
    matrix = sp.csr_matrix(
        (
            np.ones(len(ids), dtype=np.float32),
            np.frombuffer(ids, dtype=np.int32),
            np.frombuffer(indptr, dtype=np.int64),
        ),
        shape=(len(texts), max(1, len(vocabulary))),
    )
    matrix.sum_duplicates()  # counts, with sorted indices
    norms = np.sqrt(np.add.reduceat(matrix.data.astype(np.float64) ** 2, matrix.indptr[:-1]))
    matrix.data /= np.repeat(norms, np.diff(matrix.indptr)).astype(np.float32)
    return matrix


def build_neighbours(
    texts: Sequence[str],
    k: int = K,
    *,
    exact_below: int = EXACT_BELOW,
    trees: int = TREES,
    depth: int = DEPTH,
    window: int = WINDOW,
) -> Neighbours:
    """The k nearest rows of every text by 3-gram cosine (see the module docstring for the method and cost)."""
    rows = len(texts)
    if rows == 0:
        return Neighbours(np.zeros((0, 1), np.int32), np.zeros((0, 1), np.float32), np.zeros(0))
    k = max(0, min(k, rows - 1))
    x = gram_matrix(texts)
    centre = np.asarray(x.sum(axis=0, dtype=np.float64)).ravel() / rows  # m = (1/N) sum_t' X[t']
    mean_kappa = np.clip(x @ centre, 0.0, 1.0)  # X[t] · m = mean_t' kappa(t, t'), a sparse product
    index = np.full((rows, k + 1), -1, dtype=np.int32)
    weight = np.zeros((rows, k + 1), dtype=np.float32)
    best_index, best_weight = index[:, 1:], weight[:, 1:]  # views: the merges write into the result
    if k > 0 and rows < exact_below:
        _exact(x, best_index, best_weight)
    elif k > 0:
        best = np.full((rows, k), EMPTY, dtype=np.uint64)  # the k best so far, as `_key`s
        row_numbers = np.arange(rows, dtype=np.uint64)
        for tree in range(trees):
            signature = _minhash(x, range(tree * depth, (tree + 1) * depth))
            # by the first MinHash, then the second, ...; rows equal on all of them (e.g. the same text) in an
            # order of the tree's own, so that each tree shows a row a different part of a large tied group
            shuffle = _mix(row_numbers + np.uint64((tree + 1) << 40))
            order = np.lexsort((shuffle, *signature.T[::-1]))
            _merge_tree(x, order.astype(np.int32), window, best)
        for start in range(0, rows, BLOCK_ROWS):
            best_index[start : start + BLOCK_ROWS], best_weight[start : start + BLOCK_ROWS] = _unkey(
                best[start : start + BLOCK_ROWS]
            )
        del best
    itself = np.arange(rows, dtype=np.int32)[:, None]
    empty = weight <= 0.0
    index[empty] = np.broadcast_to(itself, index.shape)[empty]
    weight[empty] = 0.0
    np.minimum(weight, 1.0, out=weight)  # float32 rounding can give a duplicate 1.0000001
    index[:, :1] = itself
    weight[:, 0] = 1.0
    return Neighbours(index, weight, mean_kappa)


def _exact(x: sp.csr_matrix, best_index: np.ndarray, best_weight: np.ndarray) -> None:
    """All pairs, by sparse products over blocks of rows; top k of each row into best_*."""
    rows, k = best_index.shape
    xt = x.T.tocsr()
    block = max(1, EXACT_BLOCK_CELLS // rows)
    for start in range(0, rows, block):
        stop = min(rows, start + block)
        sims = (x[start:stop] @ xt).toarray()
        sims[np.arange(stop - start), np.arange(start, stop)] = -1.0  # itself is column 0, added later
        top = np.argsort(-sims, axis=1, kind="stable")[:, :k]  # stable: ties keep the smaller index
        best_index[start:stop] = top
        best_weight[start:stop] = np.take_along_axis(sims, top, axis=1)


def _minhash(x: sp.csr_matrix, functions: range) -> np.ndarray:
    """(N, len(functions)) uint32 MinHash values of each row's set of 3-grams; function h is a fixed mix of h."""
    grams = np.arange(x.shape[1], dtype=np.uint64)
    signature = np.empty((x.shape[0], len(functions)), dtype=np.uint32)
    for column, h in enumerate(functions):
        with np.errstate(over="ignore"):  # uint64 arithmetic wraps around, as a hash should
            hashed = _mix(
                grams * np.uint64(0x9E3779B97F4A7C15) + np.uint64(h + 1) * np.uint64(0xD1B54A32D192ED03)
            )
        values = (hashed >> np.uint64(32)).astype(np.uint32)
        signature[:, column] = np.minimum.reduceat(values[x.indices], x.indptr[:-1])
    return signature


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a fixed, well-mixed bijection of uint64."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _merge_tree(x: sp.csr_matrix, order: np.ndarray, window: int, best: np.ndarray) -> None:
    """Candidates: the `window` rows before and after each row in `order`; their exact kappa merged into best."""
    rows, k = best.shape
    window = min(window, rows - 1)
    # forward[p, d - 1] = kappa(order[p], order[p + d]), 0 past the end; by chunks of the order, copied once
    forward = np.zeros((rows, window), dtype=np.float32)
    chunk = max(1024, PAIR_CELLS * rows // max(1, x.nnz))
    for start in range(0, rows - 1, chunk):
        block = x[order[start : start + chunk + window]]  # the chunk and the window after it
        for d in range(1, window + 1):
            pairs = min(chunk, block.shape[0] - d)
            if pairs > 0:
                forward[start : start + pairs, d - 1] = _row_dots(
                    _rows(block, 0, pairs), _rows(block, d, d + pairs)
                )
    position = np.empty(rows, dtype=np.int64)
    position[order] = np.arange(rows)
    offsets = np.concatenate([-np.arange(window, 0, -1), np.arange(1, window + 1)])
    distance = np.abs(offsets) - 1
    for start in range(0, rows, BLOCK_ROWS):
        stop = min(rows, start + BLOCK_ROWS)
        p = position[start:stop, None]  # where rows start..stop sit in the order
        q = p + offsets
        valid = (q >= 0) & (q < rows)
        q = np.clip(q, 0, rows - 1)
        # offset +d reads forward[p, d - 1]; offset -d reads forward[p - d, d - 1]: the same pair, seen from q
        sims = np.where(valid, forward[np.minimum(p, q), distance], 0.0)
        merged = np.concatenate([best[start:stop], _key(order[q], sims)], axis=1)
        merged.sort(axis=1)
        merged[:, 1:][merged[:, 1:] == merged[:, :-1]] = EMPTY  # a pair met twice: the same key both times
        merged.sort(axis=1)
        best[start:stop] = merged[:, :k]


def _rows(x: sp.csr_matrix, start: int, stop: int) -> sp.csr_matrix:
    """x[start:stop] as a view on x's arrays (scipy's slicing copies them, entry by entry)."""
    import scipy.sparse as sp

    low, high = x.indptr[start], x.indptr[stop]
    return sp.csr_matrix(
        (x.data[low:high], x.indices[low:high], x.indptr[start : stop + 1] - low),
        shape=(stop - start, x.shape[1]),
        copy=False,
    )


def _row_dots(a: sp.csr_matrix, b: sp.csr_matrix) -> np.ndarray:
    """a[i] · b[i] for each row i. Each sum runs over the pair's shared 3-grams in column order, so a pair gets
    the same float32 every time it is met, whichever tree meets it and in which order (`_key` relies on it)."""
    product = a.multiply(b).tocsr()
    # one trailing 0 so that reduceat has a valid start even for empty rows at the end
    sums = np.add.reduceat(np.append(product.data, np.float32(0.0)), product.indptr[:-1])
    return np.where(np.diff(product.indptr) > 0, sums, 0.0).astype(np.float32)


def _key(index: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """One uint64 per (neighbour, kappa) that sorts by decreasing kappa, then increasing row number.

    The high half is the float32 bit pattern of kappa, inverted (for floats > 0 the bit pattern is monotone);
    the low half is the row number. A pair gets the same float32 whenever it is met (`_row_dots`), so the same
    neighbour found twice gives two equal keys, adjacent after a sort. kappa = 0 is no neighbour: EMPTY.
    """
    bits = weight.astype(np.float32).view(np.uint32).astype(np.uint64)
    key = ((bits ^ np.uint64(0xFFFFFFFF)) << np.uint64(32)) | index.astype(np.uint64)
    return np.where(weight > 0.0, key, EMPTY)


def _unkey(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, weight) of `_key`s; EMPTY gives index -1 and weight 0."""
    bits = ((key >> np.uint64(32)) ^ np.uint64(0xFFFFFFFF)).astype(np.uint32)
    empty = key == EMPTY
    index = np.where(empty, -1, (key & np.uint64(0xFFFFFFFF)).astype(np.int64)).astype(np.int32)
    return index, np.where(empty, np.float32(0.0), bits.view(np.float32))
