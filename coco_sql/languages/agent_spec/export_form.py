"""The data-agent kind's export forms (the plug-in's `exports` and `folder_export`): ``cortex_agent``, the SQL script that creates the
champion as a Snowflake agent (`export.export_cortex_agent`: its tool procedures, the semantic view, then
``CREATE AGENT ... FROM SPECIFICATION``), checked against Snowflake's documented specification fields."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from coco_sql.errors import ConfigError

FORMS = ("cortex_agent",)
SCRIPT = "create_agent.sql"


def export_text(code: str, form: str, task: Any) -> str:
    """The champion's script in `form`; ConfigError for a form agent specs have not, or a spec that cannot be
    exported."""
    from coco_sql.languages.agent_spec.export import export_cortex_agent
    from coco_sql.languages.agent_spec.language import AgentSpecLanguage

    if form not in FORMS:
        raise ConfigError(f"an agent spec exports as {', '.join(FORMS)} (got {form!r})")
    language = AgentSpecLanguage(task)
    exported = export_cortex_agent(
        language.validate(code).tree, name=f"coco_{task.name}_champion", database="COCO", schema="AGENTS",
        warehouse="COCO_WH", tables=language.agent.tables.schemas, dialect=task.dialect,
        comment=f"evolved by coco-sql on task {task.name}",
    )  # fmt: skip
    return exported.script


def write_export(text: str, folder: Path) -> list[str]:
    """Write the script into `folder` (new or empty) as `SCRIPT`; the paths written."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ConfigError(f"{folder}: the export folder must be new or empty")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SCRIPT).write_text(text, encoding="utf-8")
    return [SCRIPT]
