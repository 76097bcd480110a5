"""The store's shared AI cache (`ai_cache`, `ai_embeddings`) read into a runtime's cache, and written back.

A run reads the cache when it starts and writes its new entries with each iteration. Other users of the AI
functions do the same through these two functions (issue 26: `coco_eval` of a champion took 486 s and 196 s,
re-embedding every text a run had embedded, because it read no cache and wrote none): `api.evaluate`
(`coco_eval`, `coco-sql eval --db`), a start whose seed failed (`engine.start`), and the AI functions of a
`coco_sql.connect` connection. The entries are content-addressed and shared by every run: writing them writes no
run, event or usage row.
"""

from __future__ import annotations

from coco_sql.llm.cache import AiCache
from coco_sql.store.base import Warehouse
from coco_sql.store.records import IterationBatch


def load_cache(store: Warehouse) -> AiCache:
    """A cache holding every entry of the store's cache tables."""
    cache = AiCache()
    cache.load(*store.ai_cache_entries())
    return cache


def save_cache(store: Warehouse, cache: AiCache) -> int:
    """Write the entries `cache` made since it was last drained (an entry the store has already stays); how
    many. One transaction in DuckDB (`write_iteration` of a batch that holds only cache rows)."""
    responses, embeddings = cache.drain()
    if responses or embeddings:
        store.write_iteration(
            IterationBatch(0, 0, ai_cache=tuple(responses), ai_embeddings=tuple(embeddings))
        )
    return len(responses) + len(embeddings)
