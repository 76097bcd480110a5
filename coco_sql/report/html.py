"""The run report as ONE self-contained HTML file: `coco-sql report`, `api.report` and `CALL coco_report(run)`.

The page (`page.build`) is rendered by the jinja2 template `templates/report.html.j2`. Everything it needs is
inlined: its styles and script (`templates/report.css`, `templates/report.js`), the charting library (uPlot, MIT,
vendored in `assets/`, see its README there) and the data, as one JSON document the script reads. It makes no
network request, so it opens offline and can be attached to a ticket.

Why uPlot: the charts here are line and point series over iterations (scores, the genealogy, the ledger's lanes,
spending), drawn on canvas; uPlot does exactly that in 51 KB minified with no dependencies, stays fast with
thousands of points, and is maintained (1.6.32). Chart.js (about 200 KB), ECharts (about 1 MB) or Plotly (about
3.5 MB) would multiply the page for no chart this report needs. The solve matrix (a heat map of up to a million
cells) is drawn by the report's own script on a canvas, pixel per cell; the confusion matrix, the cost bars and
the code are plain HTML.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import Any

import jinja2

from coco_sql.report import lead
from coco_sql.report.page import Page, build
from coco_sql.store import Warehouse

_CLOSING = re.compile(r"</(script|style)", re.IGNORECASE)


@dataclass(frozen=True)
class RunReport:
    """A rendered report: the HTML text and the notes on what it could not show (empty for a full report)."""

    run_id: int
    task: str
    html: str
    notes: tuple[str, ...]


def render_report(store: Warehouse, run_id: int, *, source: str = "") -> RunReport:
    """The report of run `run_id` (it must exist). `source` names the store in the page's footer."""
    page = build(store, run_id)
    return RunReport(run_id, page.run["task"], render(page, source=source), tuple(page.notes))


def render(page: Page, *, source: str = "") -> str:
    """`page` as the HTML document."""
    return (
        _environment()
        .get_template("report.html.j2")
        .render(
            page=page,
            run=page.run,
            summary=page.summary,
            data_json=_script_json(page.data),
            css=_inline("templates", "report.css"),
            script=_inline("templates", "report.js"),
            uplot_css=_inline("assets", "uPlot.min.css"),
            uplot_js=_inline("assets", "uPlot.iife.min.js"),
            source=source,
            generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
    )


def _script_json(data: Any) -> str:
    """JSON safe inside a <script> element: `<`, `>` and `&` as unicode escapes, so no `</script>` can end it."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


@cache
def _text(folder: str, name: str) -> str:
    return (files("coco_sql.report") / folder / name).read_text(encoding="utf-8")


def _inline(folder: str, name: str) -> str:
    """A file's text to go inside a <script> or <style> element: no `</script` or `</style` ends it early."""
    return _CLOSING.sub(r"<\\/\1", _text(folder, name))


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: _text("templates", name)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(
        score=_score, delta=_delta, count=_count, percent=_percent, compact=_compact, usd=lead.usd
    )
    return environment


def _score(value: float | None, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _delta(value: float | None) -> str:
    if value is None:
        return "–"
    return "±0" if abs(value) < 5e-13 else f"{value:+.3f}".replace("-", "−")


def _count(value: float | int | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _compact(value: float | None) -> str:
    """A large count in three significant digits: 21.8M, 34.1k, 950."""
    if value is None:
        return "–"
    rounded = float(f"{value:.3g}")  # 999,999 is 1M, not 1e+03k
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(rounded) >= size:
            return f"{rounded / size:g}{suffix}"
    return f"{rounded:g}"


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.0f}%"
