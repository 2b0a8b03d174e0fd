"""The incident page's cursor bar "now" and its time cells (fixes from the browser pass)."""

from __future__ import annotations

import re
from datetime import timedelta
from html import unescape
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import time_machine
from django.conf import settings

from incidents.models import Incident
from rcaweb.cursor import format_t
from tests.base import T0
from tests.incidents.test_incident_detail import IncidentPageTestCase

LATER = T0 + timedelta(hours=5, seconds=7)


def _now_params(html: str) -> dict[str, str]:
    found = re.search(r'<a class="btn" id="cursor-live" href="([^"]+)"', html)
    assert found, "no now button"
    return {k: v[0] for k, v in parse_qs(urlsplit(unescape(found[1])).query).items()}


class NowButtonTests(IncidentPageTestCase):
    def test_now_on_an_open_incident_carries_the_present_not_the_onset(self) -> None:
        with time_machine.travel(LATER, tick=False):
            html = self.client.get(self.url).content.decode()
        assert 'data-t="2026-11-29T03:00:00Z"' in html  # the page itself still opens at the onset
        assert _now_params(html)["t"] == format_t(LATER)

    def test_now_on_a_resolved_incident_goes_to_its_end(self) -> None:
        end = T0 + timedelta(minutes=42)
        Incident.objects.filter(pk=self.incident.pk).update(
            status="resolved", window_end=end, resolved_at=end
        )
        with time_machine.travel(LATER, tick=False):
            for url in (self.url, self.url + "history/"):
                html = self.client.get(url + "?t=2026-11-29T03:10:00Z&w=1h").content.decode()
                assert _now_params(html) == {"t": format_t(end), "w": "1h"}, url


class TimeCellTests(IncidentPageTestCase):
    def test_timeline_and_evidence_times_sit_in_cells_that_never_wrap(self) -> None:
        html = self.client.get(self.url).content.decode()
        timeline = re.search(r'<section class="panel" id="timeline">(.*?)</section>', html, re.S)[1]
        rows = re.findall(r"<tr class=\"tl-.*?</tr>", timeline, re.S)
        assert rows and all('<td class="time"><a href=' in r for r in rows)
        evidence = re.search(r'<section class="panel" id="evidence">(.*?)</section>', html, re.S)[1]
        assert len(re.findall(r'<td class="time">2026-', evidence)) >= 2
        css = (Path(settings.BASE_DIR) / "static" / "css" / "base.css").read_text()
        assert re.search(r"table\.grid time, table\.grid td\.time \{ white-space: nowrap; \}", css)
