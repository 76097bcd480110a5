"""The AI response cache: content-addressed, mirrored from the warehouse tables `ai_cache` and `ai_embeddings`.

A response is keyed by sha256 over (function, model, parameters, input): the same call with the same inputs is
answered from the cache, in this run or any later run over the same store. Embeddings are cached per (model,
text), so re-scoring the same rows against new label descriptions embeds only the new descriptions.

The in-memory maps are what calls read; entries made since the last `drain()` are handed to the store, which
writes them in the same transaction as the evaluations that caused them (so a killed run loses neither, and a
resumed one re-uses what was committed).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


def canonical(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def call_key(function: str, model: str, parameters: Mapping[str, Any] | None, payload: Any) -> str:
    """The content address of one call."""
    text = canonical([function.upper(), model, parameters or {}, payload])
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedResponse:
    key: str
    function: str
    model: str
    response: str  # JSON text
    input_tokens: int
    output_tokens: int
    latency_ms: float


@dataclass(frozen=True)
class CachedEmbedding:
    model: str
    text_hash: str
    vector: np.ndarray
    input_tokens: int


class AiCache:
    """Thread-safe in-memory view of the cache tables, plus the entries not yet written to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._responses: dict[str, CachedResponse] = {}
        self._embeddings: dict[tuple[str, str], CachedEmbedding] = {}
        self._new_responses: list[CachedResponse] = []
        self._new_embeddings: list[CachedEmbedding] = []

    # -- loading from the warehouse --------------------------------------------------------------------------
    def load(self, responses: Iterable[CachedResponse], embeddings: Iterable[CachedEmbedding]) -> None:
        with self._lock:
            for entry in responses:
                self._responses[entry.key] = entry
            for entry in embeddings:
                self._embeddings[(entry.model, entry.text_hash)] = entry

    # -- responses -------------------------------------------------------------------------------------------
    def response(self, key: str) -> CachedResponse | None:
        return self._responses.get(key)

    def put_response(self, entry: CachedResponse) -> None:
        with self._lock:
            if entry.key not in self._responses:
                self._responses[entry.key] = entry
                self._new_responses.append(entry)

    # -- embeddings ------------------------------------------------------------------------------------------
    def embedding(self, model: str, digest: str) -> CachedEmbedding | None:
        return self._embeddings.get((model, digest))

    def put_embedding(self, entry: CachedEmbedding) -> None:
        with self._lock:
            key = (entry.model, entry.text_hash)
            if key not in self._embeddings:
                self._embeddings[key] = entry
                self._new_embeddings.append(entry)

    # -- writing back ----------------------------------------------------------------------------------------
    def drain(self) -> tuple[list[CachedResponse], list[CachedEmbedding]]:
        """The entries made since the last drain (for the store to write), oldest first."""
        with self._lock:
            responses, embeddings = self._new_responses, self._new_embeddings
            self._new_responses, self._new_embeddings = [], []
        return responses, embeddings

    def __len__(self) -> int:
        return len(self._responses) + len(self._embeddings)
