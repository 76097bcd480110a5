"""`coco-sql --help` and every command's help are written for users (issue 40): each command has a summary and a
description, each argument a line of help, each option that takes a value says its default, `--version` works,
and `export --form` offers exactly the forms the kinds' exporters make."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from coco_sql import __version__
from coco_sql.cli import _parser
from coco_sql.plugins import kind, kind_names
from tests.conftest import run_cli


def commands() -> dict[str, argparse.ArgumentParser]:
    parser = _parser()
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def rendered(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    formatter = parser._get_formatter()
    return formatter._expand_help(action) if action.help else ""


def test_every_command_and_option_has_help_that_shows_its_default() -> None:
    parser = _parser()
    top = parser.format_help()
    assert "Thin" not in top and "No logic" not in top  # the developer docstring is gone
    assert top.split("\n\n")[1].startswith("coco-sql improves a program against labelled rows")
    subs = commands()
    summaries = {a.dest: a.help for a in parser._subparsers._group_actions[0]._choices_actions}  # type: ignore[union-attr]
    missing = []
    for name, sub in subs.items():
        if not summaries.get(name) or not sub.description:
            missing.append(f"{name}: no summary or description")
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            text = rendered(sub, action)
            where = f"{name} {'/'.join(action.option_strings) or action.dest}"
            if not text:
                missing.append(f"{where}: no help")
            elif (
                action.option_strings and action.nargs != 0 and not action.required and "default" not in text
            ):
                missing.append(f"{where}: no default in {text!r}")
            if "\n" in (action.help or ""):
                missing.append(f"{where}: more than one line")
    assert not missing, "\n".join(missing)
    assert {"tasks", "evolve", "resume", "eval", "status", "report", "export", "history"} <= set(subs)


def test_version_prints_the_package_version() -> None:
    done = run_cli("--version", cwd=Path.cwd())
    assert done.returncode == 0
    assert done.stdout.strip() == f"coco-sql {__version__}"


def test_export_forms_are_every_kinds_forms() -> None:
    expected = {"sql"}
    for name in kind_names():
        plugin = kind(name)
        for part in (plugin.exports, plugin.folder_export):
            expected |= set(getattr(part, "forms", ()))
    export = commands()["export"]
    (form,) = (a for a in export._actions if "--form" in a.option_strings)
    assert set(form.choices) == expected  # type: ignore[arg-type]
    assert {"cortex_agent", "dbt_project", "snowflake_view"} <= expected
    text = rendered(export, form)
    for name in expected:
        assert name in text
    done = run_cli("export", "--form", "nosuch", cwd=Path.cwd())
    assert done.returncode == 2 and "invalid choice: 'nosuch'" in done.stderr


@pytest.mark.parametrize("name", ["evolve", "report", "export"])
def test_command_help_prints(name: str) -> None:
    done = run_cli(name, "--help", cwd=Path.cwd())
    assert done.returncode == 0
    assert "(default: " in done.stdout
