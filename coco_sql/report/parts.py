"""A program of several files in the report: its dependency graph as an inline SVG and per-file diffs.

A kind that has files and a graph says so through its plug-in's `parts` (a dbt project: its models'
refs and sources); everything here is kind-neutral. The graph is laid out in layers, each node one step right
of the deepest node it reads from, sources first; nodes whose file changed from the seed are marked. Each
changed file gets the report's highlighted diff (`highlight.diff`), SQL files compared as written.
"""

from __future__ import annotations

import html
from typing import Any

from coco_sql.languages.base import ProgramParts
from coco_sql.plugins import kind
from coco_sql.report.highlight import diff

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 190, 26, 56, 12, 6
MAX_LABEL = 26


def parts_view(language: str, seed_code: str, champion_code: str) -> dict[str, Any] | None:
    """The champion's graph (SVG text) and its files' diffs against the seed; None for a kind without parts."""
    program_parts = kind(language).parts
    champion = program_parts(champion_code) if program_parts is not None else None
    if program_parts is None or champion is None:
        return None
    seed = program_parts(seed_code) or ProgramParts({})
    files = []
    for path in sorted(set(seed.files) | set(champion.files)):
        old, new = seed.files.get(path), champion.files.get(path)
        if old == new:
            continue
        status = "added" if old is None else "removed" if new is None else "changed"
        code = "sql" if path.endswith(".sql") else "text"
        files.append({"path": path, "status": status, "diff": diff(old or "", new or "", code, context=3)})
    changed = {f["path"] for f in files}
    return {
        "svg": graph_svg(champion, changed),
        "nodes": len(champion.nodes),
        "edges": len(champion.edges),
        "files": files,
        "unchanged": len(set(champion.files) - changed),
    }


def layers(parts: ProgramParts) -> dict[str, int]:
    """Each node's column: 0 for a node that reads nothing, else one more than the deepest node it reads (a
    cycle, which a valid program has not, is cut where it closes)."""
    inputs: dict[str, list[str]] = {name: [] for name, _, _ in parts.nodes}
    for upstream, downstream in parts.edges:
        inputs.setdefault(downstream, []).append(upstream)
        inputs.setdefault(upstream, [])
    depth: dict[str, int] = {}
    for start in inputs:
        if start in depth:
            continue
        stack, on_path = [(start, iter(inputs[start]))], {start}
        while stack:
            node, pending = stack[-1]
            upstream = next((u for u in pending if u not in depth and u not in on_path), None)
            if upstream is not None:
                stack.append((upstream, iter(inputs[upstream])))
                on_path.add(upstream)
                continue
            depth[node] = 1 + max((depth[u] for u in inputs[node] if u in depth), default=-1)
            on_path.discard(node)
            stack.pop()
    return depth


def graph_svg(parts: ProgramParts, changed: set[str]) -> str:
    """The graph as a self-contained SVG: a box per node (sources dashed, changed nodes marked), a curve per
    edge, names escaped and cut to `MAX_LABEL` characters (the whole name in the box's title)."""
    depth = layers(parts)
    kinds = {name: (kind, path) for name, kind, path in parts.nodes}
    columns: dict[int, list[str]] = {}
    for name in sorted(depth, key=lambda n: (depth[n], n)):
        columns.setdefault(depth[name], []).append(name)
    place = {
        name: (PAD + col * (BOX_W + GAP_X), PAD + row * (BOX_H + GAP_Y))
        for col, names in columns.items()
        for row, name in enumerate(names)
    }
    width = PAD * 2 + max(len(columns), 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + max((len(n) for n in columns.values()), default=1) * (BOX_H + GAP_Y) - GAP_Y
    out = [f'<svg class="dag" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="dependency graph">']  # fmt: skip
    for upstream, downstream in parts.edges:
        if upstream not in place or downstream not in place:
            continue
        (x1, y1), (x2, y2) = place[upstream], place[downstream]
        x1, y1, y2 = x1 + BOX_W, y1 + BOX_H / 2, y2 + BOX_H / 2
        mid = (x1 + x2) / 2
        out.append(f'<path class="dag-edge" d="M{x1},{y1} C{mid},{y1} {mid},{y2} {x2},{y2}"/>')
    for name, (x, y) in place.items():
        kind, path = kinds.get(name, ("model", None))
        classes = f"dag-node dag-{kind}" + (" dag-changed" if path in changed else "")
        label = name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"
        title = html.escape(name + (f" ({path})" if path else ""), quote=False)
        out.append(
            f'<g class="{classes}"><title>{title}</title><rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" '
            f'rx="4"/><text x="{x + 8}" y="{y + BOX_H / 2 + 4}">{html.escape(label, quote=False)}</text></g>'
        )
    out.append("</svg>")
    return "".join(out)
