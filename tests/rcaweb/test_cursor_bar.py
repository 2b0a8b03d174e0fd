"""The cursor bar of every page (web.templatetags.rcaweb.cursor_bar): a t after now is flagged."""

from __future__ import annotations

import time_machine

from tests.base import BaseTestCase

PAGES = ("/", "/incidents/", "/handoffs/", "/changes/", "/slo/", "/fleet/")


class CursorBarTest(BaseTestCase):
    def bar(self, url: str) -> str:
        r = self.client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        html = r.content.decode()
        return html[
            html.index('<nav class="cursor-bar"') : html.index(
                "</nav>", html.index('<nav class="cursor-bar"')
            )
        ]

    @time_machine.travel("2026-11-29T03:12:00Z", tick=False)
    def test_it_flags_a_future_cursor_on_every_page(self) -> None:
        for page in PAGES:
            with self.subTest(page):
                bar = self.bar(f"{page}?t=2026-11-29T05:42:00Z&w=2h")
                assert "2h30m in the future: go to now" in bar, bar
                assert 'class="pill bad cursor-future" href="' + page in bar and "t=" not in bar.split("cursor-future")[1][:40]

    @time_machine.travel("2026-11-29T03:12:00Z", tick=False)
    def test_it_does_not_flag_a_past_or_live_cursor(self) -> None:
        for url in (
            "/incidents/?t=2026-11-29T03:12:00Z",
            "/incidents/?t=2026-11-29T01:00:00Z",
            "/incidents/",
        ):
            with self.subTest(url):
                assert "in the future" not in self.bar(url)
