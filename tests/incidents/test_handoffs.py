"""Handoff notes: prefilled from the incident, edits kept with before/after, exports with the cursor."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.models import Entity
from incidents.handoffs import services
from incidents.models import (
    AuditEntry,
    DiagnosisRun,
    HandoffNote,
    Hypothesis,
    Incident,
    IncidentSubject,
    Observation,
    ProposedAction,
)
from tests.base import T0, BaseTestCase

NOTE = {
    "summary": "vit-large waits on the vision quota cut at 01:30.",
    "checked": "- project_quota_exhausted: supported\n- gpu_capacity_shortage: refuted (12 GPUs free)",
    "missing": "- Run:ai audit log for the quota change",
    "next_steps": "- ask platform-admin to restore quota 16",
    "owner": "alice",
}


class HandoffTest(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.job = Entity.objects.create(
            cluster=self.cluster,
            kind="job",
            namespace="vision",
            name="vit-large",
            first_seen=T0,
            last_seen=T0,
        )
        self.incident = Incident.objects.create(
            title="vit-large pending too long",
            severity="critical",
            cluster=self.cluster,
            onset=T0 + timedelta(minutes=40),
            window_start=T0 - timedelta(minutes=20),
            owner="alice",
        )
        self.incident.subjects.add(self.job)
        Hypothesis.objects.create(
            incident=self.incident,
            code="project_quota_exhausted",
            statement="Quota 12 < 16 allocated + 8.",
            status="supported",
            confidence=0.8,
            rank=0,
            next_questions=["Who cut the quota, and why?"],
        )
        Hypothesis.objects.create(
            incident=self.incident,
            code="gpu_capacity_shortage",
            statement="Not enough free GPUs.",
            status="refuted",
            confidence=0.1,
            rank=1,
            why="12 GPUs free on fitting nodes",
            next_questions=["ignored: refuted"],
        )
        Observation.objects.create(
            incident=self.incident,
            source="runai",
            kind="audit",
            locator="GET /api/v1/audit",
            observed_at=T0,
            collected_at=T0,
            error="401 Unauthorized",
            dedup_key="a",
        )
        ProposedAction.objects.create(
            incident=self.incident,
            title="Restore the vision quota to 16",
            impact="i",
            verify="v",
            rollback="r",
        )
        self.url = f"/incidents/{self.incident.pk}/handoff/"

    def post(self, data: dict, client=None, **kw):
        return (client or self.client).post(self.url, data, **kw)

    def test_the_form_is_prefilled_from_hypotheses_open_questions_failed_sources_and_actions(self) -> None:
        p = services.prefill(self.incident)
        assert "project_quota_exhausted" in p["summary"] and "vit-large pending too long" in p["summary"]
        assert (
            "- project_quota_exhausted: supported" in p["checked"]
            and "gpu_capacity_shortage: refuted" in p["checked"]
        )
        assert "12 GPUs free" in p["checked"]
        assert "Who cut the quota, and why?" in p["missing"] and "ignored: refuted" not in p["missing"]
        assert "runai could not answer GET /api/v1/audit: 401 Unauthorized" in p["missing"]
        assert p["next_steps"] == "- Restore the vision quota to 16" and p["owner"] == "alice"
        html = self.client.get(self.url, headers={"HX-Request": "true"}).content.decode()
        assert "Who cut the quota, and why?" in html and 'name="create"' in html

    def test_creating_and_editing_keeps_history_with_before_and_after(self) -> None:
        r = self.post(NOTE)
        assert r.status_code == 302 and r["Location"].startswith(f"/incidents/{self.incident.pk}/")
        note = HandoffNote.objects.get()
        assert (note.author_name, note.summary, note.owner) == ("alice", NOTE["summary"], "alice")
        bob_responder = self.login_as(self.carol)  # carol is an admin: she may write too
        edited = NOTE | {
            "owner": "carol",
            "next_steps": "- wait for platform-admin",
            "note": note.pk,
            "edit": "",
        }
        self.post(edited, client=bob_responder)
        note.refresh_from_db()
        assert note.owner == "carol" and HandoffNote.objects.count() == 1
        entries = list(AuditEntry.objects.filter(target_type="handoffnote", target_id=note.pk).order_by("id"))
        assert [(e.action, e.user_name) for e in entries] == [
            ("handoff.create", "alice"),
            ("handoff.edit", "carol"),
        ]
        assert entries[1].before["owner"] == "alice" and entries[1].after["owner"] == "carol"
        assert entries[1].before["next_steps"] == NOTE["next_steps"]
        # An identical save writes nothing.
        self.post(edited, client=bob_responder)
        assert AuditEntry.objects.filter(target_type="handoffnote").count() == 2
        # The panel shows who edited when.
        html = self.client.get(self.url, headers={"HX-Request": "true"}).content.decode()
        assert re.search(r"edited <time[^>]*>\d\d:\d\d</time> by carol", html)

    def test_save_as_new_keeps_the_old_note(self) -> None:
        self.post(NOTE)
        first = HandoffNote.objects.get()
        self.post(NOTE | {"summary": "next shift: still waiting", "note": first.pk, "new": ""})
        assert HandoffNote.objects.count() == 2
        first.refresh_from_db()
        assert first.summary == NOTE["summary"]

    def test_bad_input_is_a_400_and_stores_nothing(self) -> None:
        r = self.post(NOTE | {"summary": ""}, headers={"HX-Request": "true"})
        assert r.status_code == 400 and "This field is required" in r.content.decode()
        assert not HandoffNote.objects.exists() and not AuditEntry.objects.exists()
        other = Incident.objects.create(title="o", onset=T0, window_start=T0)
        n = services.create_handoff(other, self.alice, NOTE)
        assert self.post(NOTE | {"note": n.pk, "edit": ""}).status_code == 404  # a note of another incident

    def test_bob_sees_no_form_and_cannot_post(self) -> None:
        bob = self.login_as(self.bob)
        html = bob.get(self.url, headers={"HX-Request": "true"}).content.decode()
        assert "<form" not in html and "<textarea" not in html
        assert self.post(NOTE, client=bob).status_code == 403
        assert not HandoffNote.objects.exists()
        assert (
            self.anon.get(self.url).status_code == 302 and self.anon.post(self.url, NOTE).status_code == 302
        )

    def test_an_htmx_post_returns_the_panel_fragment(self) -> None:
        r = self.post(NOTE, headers={"HX-Request": "true"})
        body = r.content.decode()
        assert r.status_code == 200 and body.lstrip().startswith(
            '<section class="panel handoff-panel" id="handoff">'
        )
        assert NOTE["summary"] in body and "<html" not in body

    def test_the_incident_page_includes_the_panel(self) -> None:
        services.create_handoff(self.incident, self.alice, NOTE)
        html = self.client.get(f"/incidents/{self.incident.pk}/").content.decode()
        assert 'class="panel handoff-panel"' in html and NOTE["summary"] in html
        assert f'hx-get="/incidents/{self.incident.pk}/handoff/' in html

    def test_the_markdown_export_has_every_field_and_every_link_carries_the_cursor(self) -> None:
        note = services.create_handoff(self.incident, self.alice, NOTE)
        services.edit_handoff(note, self.carol, NOTE | {"owner": "carol"})
        for url in (f"/incidents/{self.incident.pk}/handoff.md", "/handoffs.md"):
            r = self.client.get(url + "?t=2026-11-29T05:00:00Z&w=2h")
            assert r.status_code == 200 and r["Content-Type"].startswith("text/markdown")
            md = r.content.decode()
            for label in services.LABELS.values():
                assert f"### {label}" in md, (url, label)
            for f in ("summary", "missing", "next_steps"):
                assert NOTE[f] in md
            assert "carol" in md and "edited" in md
            links = re.findall(r"\]\(([^)]+)\)", md)
            # absolute (pasted into chat they still work), with the exporting page's cursor and window
            assert f"http://testserver/incidents/{self.incident.pk}/?t=2026-11-29T05%3A00%3A00Z&w=2h" in links
            assert (
                "http://testserver/c/gpu-prod/jobs/vision/vit-large/?t=2026-11-29T05%3A00%3A00Z&w=2h" in links
            )
            for link in links:
                assert link.startswith("http://testserver/") and "t=2026-11-29T05%3A00%3A00Z&w=2h" in link, (
                    link
                )

    def test_exports_link_to_the_base_url_and_freeze_a_live_cursor(self) -> None:
        with self.settings(RCAWEB_BASE_URL="https://rcaweb.example.org"):
            md = self.client.get("/handoffs.md?w=1h").content.decode()
        links = re.findall(r"\]\(([^)]+)\)", md)
        assert links and all(link.startswith("https://rcaweb.example.org/") for link in links), links
        # live: the moment of the export, so a reader later sees what the writer saw
        stamps = {re.search(r"t=([^&]+)&w=1h", link).group(1) for link in links}
        assert len(stamps) == 1 and stamps.pop().startswith("20"), links
        assert "Page: https://rcaweb.example.org/handoffs/?t=" in md

    def test_empty_fields_are_left_out_not_shown_as_placeholders(self) -> None:
        services.create_handoff(self.incident, self.alice, {"summary": "only a summary"})
        Incident.objects.create(title="noteless", onset=T0, window_start=T0)  # no cluster, no note
        md = self.client.get("/handoffs.md?t=2026-11-29T05:00:00Z").content.decode()
        assert "### Summary" in md and "only a summary" in md
        for label in ("Hypotheses checked", "Evidence still missing", "Next steps", "### Owner"):
            assert label not in md, label
        assert "—" not in md and "Cluster: —" not in md
        noteless = md.split("noteless", 1)[1]
        assert "_No handoff note yet._" in noteless and "###" not in noteless

    def test_the_exports_carry_the_leading_hypothesis_and_first_action_without_a_note(self) -> None:
        for url in (f"/incidents/{self.incident.pk}/handoff.md", "/handoffs.md?t=2026-11-29T05:00:00Z"):
            md = self.client.get(url).content.decode()
            assert "_No handoff note yet._" in md, url
            assert (
                "- Leading hypothesis: project quota exhausted (`project_quota_exhausted`, supported, "
                "confidence 0.80): Quota 12 \\< 16 allocated + 8." in md
            ), (url, md)
            assert "- First action: Restore the vision quota to 16" in md, url
            assert "&lt;" not in md, url

    def test_the_exports_read_the_diagnosis_in_force_at_their_cursor(self) -> None:
        t1 = T0 + timedelta(hours=1)
        for at, code, title, command in (
            (self.incident.onset, "gpu_capacity_shortage", "Wait <for> GPUs", ""),
            (t1, "gpu_missing", "Drain h100-03", "kubectl drain h100-03 `x`"),
        ):
            run = DiagnosisRun.objects.create(incident=self.incident, at=at, made_at=at, top_code=code)
            Hypothesis.objects.create(
                incident=self.incident, run=run, code=code, statement="s.", status="supported", confidence=0.7
            )
            ProposedAction.objects.create(
                incident=self.incident,
                run=run,
                title=title,
                command=command,
                impact="i",
                verify="v",
                rollback="r",
            )
        before = self.client.get("/handoffs.md?t=2026-11-29T03:50:00Z").content.decode()
        assert (
            "Leading hypothesis: not enough free GPUs" in before
            and "First action: Wait \\<for\\> GPUs" in before
        )
        after = self.client.get("/handoffs.md?t=2026-11-29T04:10:00Z").content.decode()
        assert "Leading hypothesis: GPU missing (`gpu_missing`" in after
        assert "First action: Drain h100-03: `` kubectl drain h100-03 `x` ``" in after

    def test_the_settings_refuse_a_base_url_that_is_not_one(self) -> None:
        from django.core.exceptions import ImproperlyConfigured

        from rcaweb.settings import base_url

        assert base_url("https://rcaweb.example.org/") == "https://rcaweb.example.org"
        assert base_url("") == ""
        for bad in ("rcaweb.example.org", "ftp://x", "https://x/?a=1", "https://x/#f"):
            with self.assertRaises(ImproperlyConfigured):
                base_url(bad)

    def test_the_handoffs_page_shows_each_open_incident_latest_note_printable(self) -> None:
        services.create_handoff(self.incident, self.alice, NOTE | {"summary": "older"})
        services.create_handoff(self.incident, self.alice, NOTE)
        Incident.objects.create(title="quiet one", onset=T0, window_start=T0)
        Incident.objects.create(
            title="closed",
            onset=T0,
            window_start=T0,
            status="resolved",
            resolved_at=T0 + timedelta(minutes=1),
        )
        html = self.client.get("/handoffs/?t=2026-11-29T05:00:00Z&w=2h").content.decode()
        assert NOTE["summary"] in html and ">older<" not in html
        assert "quiet one" in html and "No handoff note yet" in html and "closed" not in html
        assert (
            f'class="btn copy-link" data-url="/incidents/{self.incident.pk}/?t=2026-11-29T03%3A40%3A00Z&amp;w=1h"'
            in html
        )
        assert "css/console.css" in html and "@media print" in Path("static/css/console.css").read_text()
        bob = self.login_as(self.bob).get("/handoffs/?t=2026-11-29T05:00:00Z&w=2h").content.decode()
        assert "edit handoff" not in bob and 'method="post"' not in bob.split('<main class="page">')[1]

    def test_the_handoffs_page_costs_a_fixed_number_of_queries(self) -> None:
        for i in range(3):
            inc = Incident.objects.create(title=f"i{i}", onset=T0, window_start=T0)
            services.create_handoff(inc, self.alice, NOTE)
        with self.assertNumQueries(self._count()):
            self.client.get("/handoffs/?t=2026-11-29T05:00:00Z&w=2h")
        for i in range(5):
            inc = Incident.objects.create(title=f"j{i}", onset=T0, window_start=T0)
            services.create_handoff(inc, self.alice, NOTE)
        with self.assertNumQueries(self._count()):
            self.client.get("/handoffs/?t=2026-11-29T05:00:00Z&w=2h")

    def _count(self) -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as ctx:
            self.client.get("/handoffs/?t=2026-11-29T05:00:00Z&w=2h")
        return len(ctx)


# session + user (2), incidents open at t grouped into problems (1), the listed ones with their notes and subjects
# (3), their leading hypotheses and first actions in force at t (2), note edits (1); the page asks once more
# whether the user may write handoffs (1)
HANDOFFS_QUERIES = 10
HANDOFFS_MD_QUERIES = 9
# session + user (2), the incident (1), its latest note and its edits (2), subjects and related count (2), its
# leading hypothesis and first action (2)
HANDOFF_MD_QUERIES = 9


class HandoffQueryBudgetTest(BaseTestCase):
    """/handoffs/, /handoffs.md and an incident's handoff.md cost a fixed number of queries: not more for
    100 incidents than for 2, nor for incidents with hundreds of related objects."""

    def incidents(self, n: int, related: int) -> Incident:
        entities = [
            Entity(cluster=self.cluster, kind="gpu", name=f"GPU-{n}-{i}", first_seen=T0, last_seen=T0)
            for i in range(related + 1)
        ]
        Entity.objects.bulk_create(entities)
        entities = list(Entity.objects.filter(name__startswith=f"GPU-{n}-"))
        inc = None
        for i in range(n):
            inc = Incident.objects.create(title=f"i{n}-{i}", cluster=self.cluster, onset=T0, window_start=T0)
            IncidentSubject.objects.bulk_create(
                [
                    IncidentSubject(incident=inc, entity=e, role="related" if k else "subject")
                    for k, e in enumerate(entities)
                ]
            )
            Hypothesis.objects.create(
                incident=inc, code="gpu_xid_fault", statement="s", status="supported", confidence=0.9
            )
            if i % 2:
                note = services.create_handoff(inc, self.alice, NOTE)
                services.edit_handoff(note, self.alice, NOTE | {"owner": "bob"})
        return inc

    def count(self, url: str) -> int:
        with CaptureQueriesContext(connection) as ctx:
            r = self.client.get(url)
        assert r.status_code == 200, (url, r.status_code)
        return len(ctx)

    def test_budgets_do_not_grow_with_incidents_or_related_objects(self) -> None:
        one = self.incidents(2, related=1)
        urls = {
            "/handoffs/?t=2026-11-29T05:00:00Z": HANDOFFS_QUERIES,
            "/handoffs.md?t=2026-11-29T05:00:00Z": HANDOFFS_MD_QUERIES,
            f"/incidents/{one.pk}/handoff.md?t=2026-11-29T05:00:00Z": HANDOFF_MD_QUERIES,
        }
        small = {u: self.count(u) for u in urls}
        big_one = self.incidents(100, related=300)
        urls_big = dict(urls)
        urls_big[f"/incidents/{big_one.pk}/handoff.md?t=2026-11-29T05:00:00Z"] = urls_big.pop(
            f"/incidents/{one.pk}/handoff.md?t=2026-11-29T05:00:00Z"
        )
        big = {u: self.count(u) for u in urls_big}
        assert list(small.values()) == list(urls.values()), small
        assert list(big.values()) == list(urls_big.values()), big
        md = self.client.get("/handoffs.md?t=2026-11-29T05:00:00Z").content.decode()
        assert md.startswith("# Handoff: 102 open incidents") and "and 300 more (see the incident page)" in md
