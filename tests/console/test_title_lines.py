"""Lists link an incident's short title (subject and symptom) and show its cause as a line of its own under it:
the home panel, the incident list and the handoffs page read a title the same way (incidents.titles)."""

from __future__ import annotations

from datetime import timedelta

from incidents.models import Incident
from tests.base import T0, BaseTestCase

TITLE = (
    "vision/resnet-train pending: project vision quota 8 < 16 needed, cut from 16 by platform-admin at 01:05"
)
T = "2026-11-29T05:00:00Z"


class TitleLinesTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        at = T0 + timedelta(minutes=30)
        self.inc = Incident.objects.create(title=TITLE, cluster=self.cluster, onset=at, window_start=at)
        self.cause = "project vision quota 8 &lt; 16 needed, cut from 16 by platform-admin at 01:05"

    def row(self, url: str) -> str:
        html = self.client.get(url).content.decode()
        return html.split(f'href="/incidents/{self.inc.pk}/')[1].split("</td>")[0]

    def test_the_home_panel_links_the_short_title_and_shows_the_cause_under_it(self) -> None:
        row = self.row(f"/?t={T}&w=2h")
        assert '">vision/resnet-train pending</a>' in row
        assert f'<span class="cause-line">{self.cause}</span>' in row

    def test_the_incident_list_does_the_same(self) -> None:
        row = self.row(f"/incidents/?t={T}&w=2h")
        assert '">vision/resnet-train pending</a>' in row
        assert f'<span class="cause-line">{self.cause}</span>' in row

    def test_the_handoffs_page_does_the_same(self) -> None:
        html = self.client.get(f"/handoffs/?t={T}&w=2h").content.decode()
        assert f">#{self.inc.pk} vision/resnet-train pending</a>" in html
        assert f'<p class="cause-line">{self.cause}</p>' in html
