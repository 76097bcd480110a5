"""The cost ledger's records: what one evaluation's AI calls cost, with and without the cache.

Every provider call (a cache miss) is one `ProviderCall`; cache hits are counted per (function, model) with the
tokens they would have cost. `Usage` sums both for one evaluation; the store writes the provider calls to
`ai_calls` and the sums to `ai_usage`, both tagged with the program and split, so per-run and per-phase (search
vs the final program's deploy cost) totals are SQL over those tables.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProviderCall:
    function: str  # AI_CLASSIFY, AI_EMBED, ... (the SQL function that needed the call)
    model: str
    provider: str
    items: int  # texts embedded or prompts completed by this call
    input_tokens: int
    output_tokens: int
    latency_ms: float
    attempts: int = 1
    error: str | None = None


@dataclass
class UsageLine:
    """Sums for one (function, model) of one evaluation."""

    calls: int = 0  # logical calls: rows answered (from the provider or the cache)
    cache_hits: int = 0
    errors: int = 0
    input_tokens: int = 0  # spent on provider calls
    output_tokens: int = 0
    cached_input_tokens: int = 0  # what the cache hits would have cost
    cached_output_tokens: int = 0
    latency_ms: float = 0.0  # summed over provider calls


@dataclass
class Usage:
    """Thread-safe accumulator for one evaluation."""

    lines: dict[tuple[str, str], UsageLine] = field(default_factory=dict)
    provider_calls: list[ProviderCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def hit(self, function: str, model: str, count: int, input_tokens: int, output_tokens: int) -> None:
        with self._lock:
            line = self.lines.setdefault((function, model), UsageLine())
            line.calls += count
            line.cache_hits += count
            line.cached_input_tokens += input_tokens
            line.cached_output_tokens += output_tokens

    def miss(self, call: ProviderCall, logical_calls: int, errors: int = 0) -> None:
        with self._lock:
            line = self.lines.setdefault((call.function, call.model), UsageLine())
            line.calls += logical_calls
            line.errors += errors
            line.input_tokens += call.input_tokens
            line.output_tokens += call.output_tokens
            line.latency_ms += call.latency_ms
            self.provider_calls.append(call)
            if call.error is not None:
                self.errors.append(call.error)

    def row_error(self, function: str, model: str, message: str) -> None:
        """A row whose call could not even be made (bad arguments): NULL output, error recorded."""
        with self._lock:
            self.lines.setdefault((function, model), UsageLine()).errors += 1
            self.errors.append(message)

    def merge(self, other: Usage) -> None:
        """Add `other`'s lines and calls to this one."""
        with self._lock:
            for key, line in other.lines.items():
                mine = self.lines.setdefault(key, UsageLine())
                for name in UsageLine.__dataclass_fields__:
                    setattr(mine, name, getattr(mine, name) + getattr(line, name))
            self.provider_calls.extend(other.provider_calls)
            self.errors.extend(other.errors)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def replayed(self) -> Usage:
        """The same work answered entirely from the cache: what re-running an unchanged program costs."""
        replay = Usage()
        for key, line in self.lines.items():
            replay.lines[key] = UsageLine(
                calls=line.calls,
                cache_hits=line.calls - line.errors,
                errors=line.errors,
                cached_input_tokens=line.input_tokens + line.cached_input_tokens,
                cached_output_tokens=line.output_tokens + line.cached_output_tokens,
            )
        return replay

    # -- totals ----------------------------------------------------------------------------------------------
    @property
    def model_calls(self) -> int:
        return sum(line.calls - line.cache_hits for line in self.lines.values())

    @property
    def cache_hits(self) -> int:
        return sum(line.cache_hits for line in self.lines.values())

    @property
    def input_tokens(self) -> int:
        return sum(line.input_tokens for line in self.lines.values())

    @property
    def output_tokens(self) -> int:
        return sum(line.output_tokens for line in self.lines.values())

    @property
    def provider_call_count(self) -> int:
        return len(self.provider_calls)
