"""The Markdown export keeps alert- and note-derived text inert where it is pasted (issue 17, finding 5)."""

from __future__ import annotations

import re
from datetime import timedelta

from collectors.models import Entity
from incidents.handoffs import services
from incidents.models import Incident
from tests.base import T0, BaseTestCase

HOSTILE = (
    "[click me](javascript:alert(1)) ![x](https://attacker.example/pixel.png) <img src=x onerror=alert(1)>\n"
    "# Resolved, nothing to do\n"
    "> quoted\n"
    "Fake setext heading\n"
    "===\n"
    "<javascript:alert(2)>"
)


class HostileMarkdownTests(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.incident = Incident.objects.create(
            title="GPUJobPending [pwn](javascript:alert(3))\n## Fake heading <b>bold</b>",
            cluster=self.cluster,
            onset=T0 + timedelta(minutes=40),
            window_start=T0,
        )
        job = Entity.objects.create(
            cluster=self.cluster,
            kind="job",
            namespace="vision",
            name="a](javascript:x)",
            first_seen=T0,
            last_seen=T0,
        )
        self.incident.subjects.add(job)
        services.create_handoff(
            self.incident, self.alice, {"summary": HOSTILE, "next_steps": "retry with password=hunter2"}
        )

    def md(self) -> str:
        r = self.client.get(f"/incidents/{self.incident.pk}/handoff.md")
        assert r.status_code == 200
        return r.content.decode()

    def test_it_leaves_no_link_or_image_but_its_own(self) -> None:
        md = self.md()
        targets = re.findall(r"(?<!\\)\]\(([^)]*)\)", md)
        # The export's own links are absolute (RCAWEB_BASE_URL, else the request's host) and never cut short.
        assert targets and all(t.startswith("http://testserver/") for t in targets), targets
        assert all("?t=" in t for t in targets), targets  # whole: a ")" in an object's name does not end it
        assert not re.search(r"(?<!\\)!\[", md)  # no image syntax left unescaped

    def test_it_leaves_no_raw_html(self) -> None:
        md = self.md()
        assert "<img" not in md and "<b>" not in md and "<javascript:" not in md

    def test_it_leaves_no_fake_headings_quotes_or_setext_underlines(self) -> None:
        lines = self.md().splitlines()
        headings = [ln for ln in lines if ln.lstrip().startswith("#")]
        # Only the export's own: the incident heading and one heading per filled field (empty ones are left out).
        assert len(headings) == 1 + 2, headings
        assert not any(ln.lstrip().startswith(">") for ln in lines)
        assert not any(re.fullmatch(r"\s*=+\s*", ln) for ln in lines)

    def test_it_keeps_the_words_and_masks_the_secret(self) -> None:
        md = self.md()
        assert "Resolved, nothing to do" in md and "Fake heading" in md
        assert "hunter2" not in md and "[redacted]" in md.replace("\\[", "[").replace("\\]", "]")
