"""The Markdown export keeps alert- and note-derived text inert where it is pasted (issue 17, finding 5)."""

from __future__ import annotations

import re
from datetime import timedelta

from collectors.models import Entity
from incidents.handoffs import services
from incidents.models import Incident
from incidents.services import assign_owner
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
        assert not re.search(r"(?<!\\)<", md), "an unescaped < starts raw HTML or an autolink"
        assert "\\<img src=x onerror=alert\\(1\\)\\>" in md  # shown as written, inert

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


EVIL_OWNER = "[Rollback runbook](https://evil.example/x) ![](https://evil.example/t.png)"


class HostileOwnerTests(BaseTestCase):
    """Issue 42, item 6: the owner reached both exports as written, a live link and a tracking image with it."""

    def setUp(self) -> None:
        super().setUp()
        self.incident = Incident.objects.create(
            title="Pending <img src=x onerror=alert(1)> & queue a<b",
            cluster=self.cluster,
            onset=T0 + timedelta(minutes=40),
            window_start=T0,
        )
        services.create_handoff(
            self.incident, self.alice, {"summary": "see www.evil.example", "owner": EVIL_OWNER}
        )
        assign_owner(self.incident, EVIL_OWNER, self.alice)

    def exports(self) -> dict[str, str]:
        out = {}
        for url in (f"/incidents/{self.incident.pk}/handoff.md", "/handoffs.md"):
            r = self.client.get(url)
            assert r.status_code == 200, url
            out[url] = r.content.decode()
        return out

    def test_no_export_carries_a_link_or_image_the_owner_wrote(self) -> None:
        for url, md in self.exports().items():
            assert "Owner: \\[Rollback runbook\\]\\(https\\://evil" in md, url  # the words, inert
            targets = re.findall(r"(?<!\\)\]\(([^)]*)\)", md)
            assert targets and all(t.startswith("http://testserver/") for t in targets), (url, targets)
            assert not re.search(r"(?<!\\)!\[", md), url
            # nor a bare URL, which GFM links by itself
            assert "https://evil" not in md and "www.evil" not in md, url

    def test_titles_escape_html_for_markdown_not_as_entities(self) -> None:
        for url, md in self.exports().items():
            assert "&lt;" not in md and "&amp;" not in md, url
            assert "Pending \\<img src=x onerror=alert\\(1\\)\\> \\& queue a\\<b" in md, url
            own = re.sub(r"http://testserver/\S*", "", md)  # the export's own links carry ?t=…&w=…
            assert not re.search(r"(?<!\\)[<&]", own), url
