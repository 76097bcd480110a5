"""A kind's own commands and an engine's parts are reached through the registry (issue 41 step 6): the CLI adds
the commands kinds contribute (built-ins listed in `plugin_loader`, installed ones as entry points, here the toy
kind's), reads the installed distributions only when a command line names none of the known commands, and the
CLI, `coco_sql.connect` and the SQL kind use an engine's deploy, mirror, optimizer and connection as its parts."""

from __future__ import annotations

from pathlib import Path

import pytest

from coco_sql import cli_help
from coco_sql.cli import _parser, run
from coco_sql.errors import ConfigError
from coco_sql.plugin_loader import COMMAND_GROUP, INIT_GROUP
from coco_sql.plugins import engine


@pytest.fixture
def toy_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An installed distribution whose kind brings a command of `coco-sql` and a source of `coco-sql init`."""
    info = tmp_path / "site" / "coco_toy_kind-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: coco-toy-kind\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{COMMAND_GROUP}]\ntoy-check = tests.toy_kind:add_command\n"
        f"[{INIT_GROUP}]\ntoy = tests.toy_kind:add_init\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return tmp_path


def test_an_installed_kinds_commands_run_and_are_listed(
    toy_commands: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(["toy-check", "threshold x 4"]) == 0
    assert capsys.readouterr().out == "a toy program\n"
    assert run(["toy-check", "thresh x"]) == 2
    assert capsys.readouterr().err == (
        "coco-sql: error: a toy program is one line: threshold <input column> <integer>\n"
    )
    assert run(["init", "toy", str(toy_commands / "seeds")]) == 0
    assert (toy_commands / "seeds" / "seed.toy").read_text() == "threshold x 0\n"
    listed = _parser().format_help()
    assert listed.index("demo-agent-server") < listed.index("history") < listed.index("toy-check")
    init = _parser(["init", "--help"])._subparsers._group_actions[0].choices["init"]  # type: ignore[union-attr]
    assert "what to read: aifo or dbt or toy" in " ".join(init.format_help().split())


def test_a_built_in_command_line_reads_no_installed_distribution(
    toy_commands: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(group: str) -> dict[str, str]:
        raise AssertionError(f"read the installed plug-ins of {group}")

    monkeypatch.setattr(cli_help, "installed", refused)
    for argv in (["evolve", "lockpicking6"], ["init", "dbt", "p"], ["demo-agent-server"], ["history", "x"]):
        _parser(argv)
    with pytest.raises(AssertionError, match=COMMAND_GROUP):
        _parser(["toy-check", "threshold x 4"])
    with pytest.raises(AssertionError, match=INIT_GROUP):
        _parser(["init", "toy", "seeds"])


def test_the_built_in_kinds_commands_are_the_kinds_own() -> None:
    parser = _parser([])
    demo = parser.parse_args(["demo-agent-server"]).handler
    dbt = parser.parse_args(["init", "dbt", "project"]).handler
    assert (demo.__module__, dbt.__module__) == (
        "coco_sql.languages.agent_spec.cli",
        "coco_sql.languages.dbt.cli",
    )


def test_an_engine_without_a_part_says_so_in_one_line() -> None:
    from coco_sql.engines.snowflake import aifo

    assert engine("snowflake").ai_optimizer().parse_spec is aifo.parse_spec
    with pytest.raises(ConfigError, match=r"^engine 'duckdb' has no AI-function optimizer$"):
        engine("duckdb").ai_optimizer()
    with pytest.raises(ConfigError, match=r"^engine 'duckdb' has no deploy or mirror commands$"):
        engine("duckdb").warehouse_commands()
    with pytest.raises(ConfigError, match=r"^engine 'snowflake' has no connection with procedures$"):
        engine("snowflake").connect(":memory:")


def test_mirror_reaches_the_warehouse_through_its_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`coco-sql mirror` opens the connection's session through the Snowflake engine's part, reads its store,
    says in one line that it holds no run, and closes the session (a local-testing one here)."""
    pytest.importorskip("snowflake.snowpark", reason="Snowpark is not installed (pip install '.[snowflake]')")
    from coco_sql.engines.snowflake.procs import connection
    from tests.snowpark_helpers import procedure_session

    session = procedure_session()
    opened: list[tuple[str, str]] = []

    def open_session(name: str, command: str) -> object:
        opened.append((name, command))
        return session

    monkeypatch.setattr(connection, "open_session", open_session)
    closed = session.close
    monkeypatch.setattr(session, "close", lambda: (opened.append(("closed", "")), closed()))
    assert run(["mirror", "--connection", "demo", "--db", str(tmp_path / "m.duckdb"), "--quiet"]) == 2
    assert capsys.readouterr().err == "coco-sql: error: no runs in connection demo\n"
    assert opened == [("demo", "mirror"), ("closed", "")]
