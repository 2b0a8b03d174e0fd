"""The fleet page's heat map: each node row's GPU cells as ready HTML, one link per GPU."""

from __future__ import annotations

from django.utils.html import format_html
from django.utils.safestring import mark_safe

from rcaweb.cursor import Cursor
from web.console.fleet import Fleet
from web.console.funnel import units


def with_cell_html(f: Fleet, cursor: Cursor) -> Fleet:
    """Each row's GPU cells as ready HTML: 1,600 GPUs at 200 nodes made the heat map most of the page's
    rendering time as template tags (measured with bench/pages.py); escaped like any template value."""
    for row in f.rows:
        parts = []
        for c in row.cells:
            title = f"GPU {c.index} · {c.state}" + (f" · {c.pod}" if c.pod and c.kind == "whole" else "")
            if c.kind == "shared":
                title += f" · {c.slices} share(s), {units(c.units)} of the GPU" + (
                    f": {c.detail}" if c.detail else ""
                )
            elif c.kind == "mig":
                title += f" · MIG {c.slices} of {c.slices_total} instance(s) in use" + (
                    f": {c.detail}" if c.detail else ""
                )
            if c.sm is not None:
                title += f" · SM {round(c.sm * 100)}%"
            parts.append(
                format_html(
                    '<a class="gcell gcell-{}" href="{}" title="{}">{}</a>',
                    c.state,
                    cursor.link(c.version.entity.get_absolute_url()),
                    title,
                    c.index,
                )
            )
        row.cells_html = mark_safe("".join(parts))  # noqa: S308 - each part is format_html-escaped
    return f
