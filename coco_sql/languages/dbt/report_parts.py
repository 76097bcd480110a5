"""The report's view of a dbt project (the dbt plug-in's `parts`): its files, and its model DAG.

The DAG is read statically: each model's Jinja is parsed (never rendered) and its `ref('m')` and
`source('s', 't')` calls with literal arguments are the edges. Parsing is linear in the text and runs no
template code, so the report can do it in its own process over any stored program; a ref built at render time
(a macro's argument, a loop) is not drawn. Models are nodes of kind ``model``, sources ``source``.
"""

from __future__ import annotations

import jinja2
import jinja2.nodes

from coco_sql.errors import CandidateRejected
from coco_sql.languages.base import ProgramParts
from coco_sql.languages.dbt.project import DbtProject


def program_parts(code: str) -> ProgramParts | None:
    """The project's files and its ref/source graph; None when `code` is not a project's text form."""
    try:
        project = DbtProject.from_text(code)
    except (CandidateRejected, ValueError):
        return None
    env = jinja2.Environment(autoescape=False)
    nodes: dict[str, tuple[str, str, str | None]] = {}
    edges: list[tuple[str, str]] = []
    for name, path in sorted(project.models().items()):
        nodes[name] = (name, "model", path)
        for kind, upstream in _calls(env, project.files[path]):
            if kind == "source":
                nodes.setdefault(upstream, (upstream, "source", None))
            edges.append((upstream, name))
    for upstream, _ in edges:  # a ref to a model the project lacks (a rejected program) is drawn as a node
        nodes.setdefault(upstream, (upstream, "model", None))
    return ProgramParts(dict(project.files), tuple(nodes.values()), tuple(dict.fromkeys(edges)))


def _calls(env: jinja2.Environment, text: str) -> list[tuple[str, str]]:
    """('ref', model) and ('source', 'source.table') for each call with literal arguments in `text`."""
    try:
        tree = env.parse(text)
    except jinja2.TemplateSyntaxError:
        return []
    found = []
    for call in tree.find_all(jinja2.nodes.Call):
        if not isinstance(call.node, jinja2.nodes.Name) or call.node.name not in ("ref", "source"):
            continue
        args = [a.value for a in call.args if isinstance(a, jinja2.nodes.Const) and isinstance(a.value, str)]
        if call.node.name == "ref" and args:
            found.append(("ref", args[-1]))  # ref('package', 'model') names the model last
        elif call.node.name == "source" and len(args) == 2:
            found.append(("source", ".".join(args)))
    return found
