"""Would a dbt champion's models run in Snowflake? `coco-sql check-deploy` per model
(the dbt plug-in's `Exporter.check_deploy`).

Each model is rendered by the validator's own Jinja (`render.render_models`: ref, source, config, var and the
project's macros; nothing else runs) and its SQL goes through Snowflake's deploy check
(the deploy engine's `EnginePlugin.check_deploy`): every function Snowflake lacks, argument count, AI argument name and type,
each a finding labelled with the model's file. A DuckDB-dialect project is checked as sqlglot writes it for
Snowflake, which is what dbt-snowflake would run. A project that does not render is one finding, not an error:
check-deploy lists, it does not refuse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coco_sql.engines import Finding
from coco_sql.errors import CandidateRejected
from coco_sql.languages.dbt.project import DbtProject
from coco_sql.languages.dbt.render import render_models
from coco_sql.languages.dbt.yaml_check import check_yaml
from coco_sql.plugin_loader import SANDBOX_DIALECT
from coco_sql.plugins import deploy_engine

if TYPE_CHECKING:
    from coco_sql.tasks import TaskPack


def deploy_findings(
    code: str, task: TaskPack | None, where: str, dialect: str | None = None
) -> list[Finding]:
    """Every finding of every model of project `code` (written in `dialect`, else the dbt `task`'s; without a
    task, DuckDB's), each `where` followed by the model's path."""
    spec = task.kind_data.spec if task is not None else None
    dialect = dialect or (spec.dialect if spec is not None else SANDBOX_DIALECT)
    try:
        project = DbtProject.from_text(code)
        properties = check_yaml(project)
        rendered = render_models(
            project,
            declared_sources=properties.sources,
            variables=properties.variables,
            deadline_s=spec.render_deadline_s if spec is not None else 5.0,
        )
    except CandidateRejected as error:
        return [Finding(where, f"is not a project dbt can run: {error}")]
    findings: list[Finding] = []
    target = deploy_engine()
    for model in sorted(rendered.values(), key=lambda m: m.path):
        findings += target.check_deploy(model.sql, dialect, where=f"{where} {model.path}")
    return findings
