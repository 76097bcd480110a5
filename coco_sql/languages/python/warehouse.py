"""Python programs run as temporary Python UDFs of the warehouse (Snowflake), over a split's staged instances.

A stored procedure may not start a process, so the zygote sandbox of `sandbox.python_sandbox` cannot run there.
Snowflake's own sandbox runs a UDF's Python instead: each program becomes one temporary UDF (created for its
run, dropped after it, so nothing one program changes reaches the next), whose code is an adapter around the
program and the pack's harness (`udf_source`). The UDF runs once per instance, over a staged table of (ID,
INSTANCE as JSON), and answers JSON text: the harness's answer, or the instance's error. Only that text comes
back; it is parsed as data, and the harness's `measure` turns each answer into the instance's output here, in
coco-sql's process, on its own copy of the instance (`language.finished`), exactly as after the zygote.

The validator (`languages.python.validate`) is the first layer in front of this, as on DuckDB. The deadline is
the statement's timeout and the memory bound the warehouse's. Snowpark's local testing mode runs a UDF in this
process (under `engines.snowflake.strict`'s limits in the tests): there the deadline is not enforced.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pandas as pd

from coco_sql.bounded import json_value
from coco_sql.languages.base import Program, RunResult
from coco_sql.languages.python.answers import Measure, finished, instance_rows
from coco_sql.store.base import PYTHON_HANDLER, CandidateEngine

if TYPE_CHECKING:
    from coco_sql.tasks import Split

MAX_ANSWER_CHARS = (
    64 * 2**20
)  # one instance's answer, as JSON text, at most (a bigger one is that row's error)


class WarehousePythonRunner:
    """One split's instances staged in the warehouse; runs each program there as its own UDF (module docstring)."""

    def __init__(
        self,
        engine: CandidateEngine,
        split: Split,
        columns: Sequence[str],
        harness: str,
        entry: str,
        measure: Measure | None = None,
    ) -> None:
        self._engine = engine
        self._split = split
        self._harness, self._entry, self._measure = harness, entry, measure
        instances = instance_rows(split.inputs, list(columns))
        self.instances: dict[str, Mapping[str, Any]] = dict(instances)
        self._staged = engine.stage_rows(f"{split.name}_py", instances_frame(instances))
        self._probes: Any = None  # the engine's probe runner (`CandidateEngine.probes`), on first use
        self._probe_table: str | None = None

    @property
    def probe_sandbox(self) -> Any:
        """The split's rows as the mutator's probes read them (`input`), staged on first use."""
        if self._probes is None:
            self._probe_table = self._engine.stage_rows(self._split.name, self._split.inputs)
            self._probes = self._engine.probes({"input": self._probe_table})
        return self._probes

    def run(
        self, program: Program, deadline_s: float, on_timeout: Callable[[], None] | None = None
    ) -> RunResult:
        started = time.perf_counter()
        source = udf_source(program.runnable, self._harness, self._entry)
        answers: list[tuple[object, object]] = []
        failures: dict[str, str] = {}
        for instance_id, text in self._engine.run_python(source, self._staged, deadline_s):
            answer, error = _answer(text)
            if error is None:
                answers.append((instance_id, answer))
            else:
                failures[instance_id] = error
        elapsed_ms = (time.perf_counter() - started) * 1000
        return finished(answers, failures, elapsed_ms, self._measure, self.instances)

    def close(self) -> None:
        for table in (self._staged, self._probe_table):
            if table is not None:
                self._engine.drop_staged(table)


def udf_source(program: str, harness: str, entry: str) -> str:
    """The UDF's code: an adapter that runs the pack's harness with the program's entry function on one instance
    (JSON) and answers JSON, {"answer": ...} or {"error": "<one line>"}. The program and the harness travel
    base64-encoded, so no text of theirs can end the function's body; they are executed inside the UDF, on its
    first row, each in a namespace of its own."""
    program_b64, harness_b64 = (base64.b64encode(text.encode()).decode() for text in (program, harness))
    return f'''import base64
import json

_SOURCES = {{"program": base64.b64decode("{program_b64}").decode(),
            "harness": base64.b64decode("{harness_b64}").decode()}}
_LOADED = {{}}


def _plain(value):
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    raise TypeError(type(value).__name__ + " is not JSON")


def _load():
    if not _LOADED:
        harness = {{"__name__": "harness"}}
        exec(compile(_SOURCES["harness"], "harness.py", "exec"), harness)
        program = {{"__name__": "program"}}
        exec(compile(_SOURCES["program"], "program.py", "exec"), program)
        _LOADED["run"], _LOADED["entry"] = harness["run"], program[{entry!r}]
    return _LOADED["run"], _LOADED["entry"]


def {PYTHON_HANDLER}(instance):
    try:
        run, entry = _load()
        return json.dumps({{"answer": run(entry, json.loads(instance))}}, default=_plain, allow_nan=False)
    except BaseException as error:
        text = " ".join(str(error).split())[:300]
        return json.dumps({{"error": type(error).__name__ + (": " + text if text else "")}})
'''


def instances_frame(instances: Sequence[tuple[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """A split's instances as the table its UDFs read: ID, and INSTANCE as JSON text."""
    return pd.DataFrame(
        {"ID": [i for i, _ in instances], "INSTANCE": [json.dumps(dict(v)) for _, v in instances]}
    )


def _answer(text: object) -> tuple[Any, str | None]:
    """(answer, None) or (None, the instance's error) from the UDF's JSON text, read as hostile data."""
    if not isinstance(text, str):
        return None, "the program's UDF answered nothing for this instance"
    if len(text) > MAX_ANSWER_CHARS:
        return None, f"the answer is larger than {MAX_ANSWER_CHARS} characters"
    try:
        value = json_value(text)
    except ValueError:
        return None, "the program's UDF answered text that is not JSON (or nested too deeply)"
    if isinstance(value, dict) and set(value) == {"answer"}:
        return value["answer"], None
    if isinstance(value, dict) and set(value) == {"error"} and isinstance(value["error"], str):
        return None, value["error"][:300]
    return None, "the program's UDF answered JSON of the wrong shape"
