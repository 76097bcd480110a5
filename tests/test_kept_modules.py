"""A second procedure call in one local-testing process works (issue 41): Snowpark's local testing deletes from
`sys.modules` what a call imported, and an import made again by a later call ran the module a second time,
which numpy's FFT extension refuses ("cannot load module more than once per process").
`engines.snowflake.kept_modules.keeping_imports` keeps those modules; `deploy_local` wraps every handler with it.

Each check runs in a fresh interpreter: in the test process the modules may already be imported, and then no
call imports them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from snowflake.snowpark import Session
from snowflake.snowpark.types import LongType, StringType
from coco_sql.engines.snowflake.kept_modules import keeping_imports

def handler(session: Session, what: str) -> str:
    if what == "fft":
        import numpy.fft  # what scipy.sparse imports, lazily imported where a run ranks rows
        return str(numpy.fft.fft([1.0, 0.0]).real.tolist())
    import counted  # a module that counts how often it runs
    return str(counted.RUNS)

session = Session.builder.config("local_testing", True).create()
wrap = sys.argv[2] == "kept"
for name in ("fft", "counted"):
    session.sproc.register(keeping_imports(handler) if wrap else handler, name=f"p_{name}",
                           input_types=[StringType()], return_type=StringType(), replace=True)
results = []
for name in ("counted", "counted", "fft", "fft"):
    try:
        results.append(session.call(f"p_{name}", name))
    except Exception as error:
        results.append(type(error).__name__ + ": " + str(error).splitlines()[0][-60:])
try:  # after the calls, outside any: what a DuckDB run in the same process imports
    import numpy.fft
    results.append("imported")
except ImportError as error:
    results.append(str(error))
print(json.dumps(results))
"""


def _calls(tmp_path: Path, mode: str) -> list[str]:
    (tmp_path / "counted.py").write_text(
        "import builtins\nbuiltins.COUNTED_RUNS = getattr(builtins, 'COUNTED_RUNS', 0) + 1\n"
        "RUNS = builtins.COUNTED_RUNS\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), mode],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


def test_modules_a_local_testing_call_imported_stay_imported(tmp_path: Path) -> None:
    assert _calls(tmp_path, "kept") == ["1", "1", "[1.0, 1.0]", "[1.0, 1.0]", "imported"]


def test_without_keeping_them_the_second_call_fails(tmp_path: Path) -> None:
    """The cause, shown on Snowpark itself: unwrapped, a module runs again on each call, and the FFT extension
    refuses its second load (inside the call, or after it)."""
    plain = _calls(tmp_path, "plain")
    again = "cannot load module more than once per process"
    assert plain[:3] == ["1", "2", "[1.0, 1.0]"] and again in plain[3] and again in plain[4], plain
