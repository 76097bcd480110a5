"""What a stand-in bills: the embedded AI_CLASSIFY's usage recorded as Cortex would count it (issue 15, part 1).

The embedded model answers AI_CLASSIFY by embedding the input, the categories and the examples once per query,
which costs a few hundred tokens in all. Deployed, Cortex runs one model call per row, and that call's prompt
carries the input, every category (label and description) and every few-shot example (input and labels), so a
program with 300 inline examples pays for all of them on every row. A deploy cost estimated from the embedding
work would rank that program as cheap as the seed. So the embedded AI_CLASSIFY records, per row answered:

    input tokens   tokens(input) + tokens(categories) + tokens(examples' inputs and labels)
    output tokens  tokens(the answer's JSON, {"labels": [...]})

counted with the embedded model's tokenizer (Cortex's managed prompt around them is not counted, as
AI_COUNT_TOKENS leaves it out too). The rows are one provider call when any embedding had to be computed, else
cache hits. The embeddings themselves stay cached and are not accounted a second time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from coco_sql.llm.usage import ProviderCall, Usage

Counter = Callable[[str], int]


def bill_classify(
    usage: Usage,
    counter: Counter,
    function: str,
    model: str,
    texts: Sequence[str],
    categories: Sequence[str],
    examples: Sequence[tuple[str, Sequence[str]]],
    answers: Sequence[Sequence[str] | None],
    work: Usage,
) -> None:
    """Record `texts`' rows in `usage` as Cortex would bill them (module docstring). `work` is what the embedding
    took (its provider calls say whether anything was computed, and how long it took)."""
    if not texts:
        return
    shared = sum(counter(c) for c in categories) + sum(
        counter(text) + counter(json.dumps(list(labels))) for text, labels in examples
    )
    input_tokens = sum(counter(t) for t in texts) + shared * len(texts)
    output_tokens = sum(counter(json.dumps({"labels": list(a)})) for a in answers if a is not None)
    computed = [call for call in work.provider_calls if call.error is None]
    if computed:
        latency = sum(call.latency_ms for call in computed)
        call = ProviderCall(function, model, "embedded", len(texts), input_tokens, output_tokens, latency)
        usage.miss(call, logical_calls=len(texts))
    else:
        usage.hit(function, model, len(texts), input_tokens, output_tokens)
