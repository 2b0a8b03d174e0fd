"""Absolute links for the handoff exports: pasted into chat or a ticket, a link must still open the same view.

A Markdown export is read elsewhere and later, so every link in it is absolute (``RCAWEB_BASE_URL`` when
set, else the scheme and host the export was requested on) and carries the exporting page's cursor and
window; a live page exports the moment of the export, so the reader sees what the writer saw.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from rcaweb.cursor import Cursor
from rcaweb.http import RcaRequest


@dataclass(frozen=True)
class ExportLinks:
    """``url(path)``: ``base`` + ``path`` with ``cursor``'s t and w."""

    base: str  # "https://rcaweb.example.org", no trailing slash
    cursor: Cursor

    def url(self, path: str) -> str:
        # Parentheses are legal in a URL but end a Markdown link target: an object named "a)" must not
        # cut the link short (and leave the rest of its name as live Markdown).
        return (self.base + self.cursor.link(path)).replace("(", "%28").replace(")", "%29")


def export_links(request: RcaRequest) -> ExportLinks:
    """The links of an export requested by ``request``: its base URL and its cursor, frozen when live."""
    base = getattr(settings, "RCAWEB_BASE_URL", "") or f"{request.scheme}://{request.get_host()}"
    cur = request.cursor
    return ExportLinks(base.rstrip("/"), Cursor(at=cur.t, window=cur.window, window_given=True))
