"""/handoffs/ and /handoffs.md group open incidents by problem, as the home page does: one card per shared cause,
led by its most urgent incident (its note, leading hypothesis and first action), the others listed under it."""

from __future__ import annotations

import re
from datetime import timedelta

import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.inventory import record_states
from incidents import causes
from incidents.handoffs import board, services
from incidents.models import DiagnosisRun, Hypothesis, Incident, ProposedAction
from tests.base import T0, BaseTestCase
from tests.collectors.factories import gpu_obs, gpu_uuid
from web.console.home import open_incidents

T = "2026-11-29T05:00:00Z"
QUOTA = "project_quota_exhausted|project/vision"
NOTE = {"summary": "", "checked": "", "missing": "", "next_steps": "", "owner": ""}


class HandoffProblemsTest(BaseTestCase):
    def incident(self, title: str, severity: str, minutes: int, key: str, code: str) -> Incident:
        at = T0 + timedelta(minutes=minutes)
        inc = Incident.objects.create(
            title=title, severity=severity, cluster=self.cluster, onset=at, window_start=at, diagnosed_at=at
        )
        run = DiagnosisRun.objects.create(
            incident=inc, at=at, made_at=at, top_code=code, top_statement="s", supported=1, cause_key=key
        )
        Incident.objects.filter(pk=inc.pk).update(cause_key=key)
        h = Hypothesis.objects.create(
            incident=inc, run=run, code=code, rank=0, confidence=0.9, status="supported",
            statement=f"{title}: project vision uses 16 of 16 GPUs of quota.",
        )  # fmt: skip
        ProposedAction.objects.create(
            incident=inc, run=run, hypothesis=h, title=f"Raise the vision quota for {title}",
            command="runai project edit vision --gpu 24", impact="i", verify="v", rollback="r",
        )  # fmt: skip
        return inc

    def setUp(self) -> None:
        super().setUp()
        self.a = self.incident("train-a <waits>", "warning", 10, QUOTA, "project_quota_exhausted")
        self.b = self.incident("train-b waits", "critical", 20, QUOTA, "project_quota_exhausted")
        self.c = self.incident("train-c waits", "warning", 30, QUOTA, "project_quota_exhausted")
        self.lone = self.incident("llama-ft crash-loops", "warning", 5, "", "gpu_oom")
        services.create_handoff(self.c, self.alice, NOTE | {"summary": "train-c asked to shrink to 4 GPUs"})

    def test_it_groups_the_incidents_of_one_cause_led_by_the_most_urgent(self) -> None:
        got = board.open_problems_with_notes(T0 + timedelta(hours=2))
        assert (got.open_total, got.problems_total) == (4, 2)
        quota, lone = got.problems
        assert quota.lead.pk == self.b.pk  # critical first, then onset
        assert [m.pk for m in quota.others] == [self.a.pk, self.c.pk]
        assert (quota.members, quota.more, quota.shared, quota.code) == (
            3,
            0,
            True,
            "project_quota_exhausted",
        )
        assert quota.on == "project vision" and quota.url.endswith(
            "cause=project_quota_exhausted%7Cproject%2Fvision"
        )
        assert lone.lead.pk == self.lone.pk and not lone.shared and lone.others == []
        # the same problems, in the same order, as the home page
        home = open_incidents(T0 + timedelta(hours=2))
        assert [r.pk for r in home] == [p.lead.pk for p in got.problems]
        assert [[c.pk for c in r.children] for r in home] == [[m.pk for m in p.others] for p in got.problems]

    def test_the_page_shows_one_card_per_problem_with_its_members_and_their_notes(self) -> None:
        html = self.client.get(f"/handoffs/?t={T}&w=2h").content.decode()
        assert "Handoff: 4 open incidents in 2 problems" in html
        cards = re.findall(r'<article class="panel handoff-item[^"]*" id="problem-(\d+)"', html)
        assert cards == [str(self.b.pk), str(self.lone.pk)]
        card = html.split(f'id="problem-{self.b.pk}"')[1].split("</article>")[0]
        assert '3 incidents</span> one cause: <strong class="problem-cause">Project quota exhausted' in card
        assert (
            "Raise the vision quota for train-b waits" in card
            and "runai project edit vision --gpu 24" in card
        )
        assert f'id="member-{self.a.pk}"' in card and f'id="member-{self.c.pk}"' in card
        assert "train-a &lt;waits&gt;" in card and "<waits>" not in html  # escaped, never raw
        assert "Handoff by alice: train-c asked to shrink to 4 GPUs" in card
        assert f'href="/incidents/{self.a.pk}/?t=' in card  # each member is a link with its cursor
        lone = html.split(f'id="problem-{self.lone.pk}"')[1].split("</article>")[0]
        assert "one cause" not in lone and "problem-members" not in lone and "No handoff note yet." in lone

    def test_the_markdown_export_groups_the_same_way_with_markdown_escaping(self) -> None:
        md = self.client.get(f"/handoffs.md?t={T}&w=2h").content.decode()
        assert md.startswith("# Handoff: 4 open incidents in 2 problems as of 2026-11-29T05:00:00Z")
        assert "## Problem: Project quota exhausted on project vision (3 incidents)" in md
        lead = md.split("## Problem:")[1].split("### The other 2 incidents")[0]
        assert f"### [Incident #{self.b.pk}: train-b waits]" in lead
        name = causes.name("project_quota_exhausted")
        assert f"- Leading hypothesis: {name} (`project_quota_exhausted`, supported" in lead
        assert "- First action: Raise the vision quota for train-b waits: `` runai project edit" not in lead
        assert (
            "- First action: Raise the vision quota for train-b waits: ` runai project edit vision --gpu 24 `"
            in lead
        )
        members = md.split("### The other 2 incidents")[1].split("## [Incident")[0]
        assert f"- [#{self.a.pk}: train-a \\<waits\\>](http://testserver/incidents/{self.a.pk}/?t=" in members
        assert "  - Summary: train-c asked to shrink to 4 GPUs" in members
        assert "&lt;" not in md
        assert f"## [Incident #{self.lone.pk}: llama-ft crash-loops]" in md  # a problem of its own: as before
        assert md.count("- Leading hypothesis:") == 2  # the leads; members share the problem's cause

    def test_more_members_than_listed_are_counted_and_linked(self) -> None:
        for i in range(board.MEMBERS_SHOWN + 2):
            self.incident(f"extra-{i}", "info", 40 + i, QUOTA, "project_quota_exhausted")
        got = board.open_problems_with_notes(T0 + timedelta(hours=2)).problems[0]
        assert (got.members, len(got.others), got.more) == (
            3 + board.MEMBERS_SHOWN + 2,
            board.MEMBERS_SHOWN,
            4,
        )
        html = self.client.get(f"/handoffs/?t={T}&w=2h").content.decode()
        assert (
            'and 4 more: <a href="/incidents/?status=active&amp;cause=project_quota_exhausted%7Cproject%2Fvision&amp;t='
            in html
        )

    def test_a_past_cursor_groups_by_the_cause_in_force_then(self) -> None:
        # c's later run finds another cause: after it, c is a problem of its own; before it, still grouped
        later = T0 + timedelta(hours=3)
        DiagnosisRun.objects.create(
            incident=self.c, at=later, made_at=later, top_code="gpu_oom", top_statement="s", supported=1, cause_key=""
        )  # fmt: skip
        before = board.open_problems_with_notes(T0 + timedelta(hours=2))
        after = board.open_problems_with_notes(T0 + timedelta(hours=4))
        assert [p.members for p in before.problems] == [3, 1]
        assert sorted(p.members for p in after.problems) == [1, 1, 2]

    def test_the_query_count_holds_with_more_grouped_incidents(self) -> None:
        def count(url: str) -> int:
            with CaptureQueriesContext(connection) as ctx:
                assert self.client.get(url).status_code == 200
            return len(ctx)

        urls = [f"/handoffs/?t={T}&w=2h", f"/handoffs.md?t={T}&w=2h"]
        small = [count(u) for u in urls]
        for i in range(20):
            inc = self.incident(
                f"more-{i}", "warning", 50 + i, QUOTA if i % 2 else f"gpu_xid_fault|gpu/G{i % 3}", "x"
            )
            services.create_handoff(inc, self.alice, NOTE | {"summary": f"more-{i}"})
        assert [count(u) for u in urls] == small

    def test_a_title_shows_short_then_its_cause_on_a_line_of_its_own(self) -> None:
        Incident.objects.filter(pk=self.b.pk).update(
            title="vision/train-b pending: project vision quota 8 < 16 needed, cut from 16 by platform-admin"
        )
        html = self.client.get(f"/handoffs/?t={T}&w=2h").content.decode()
        card = html.split(f'id="problem-{self.b.pk}"')[1].split("</article>")[0]
        assert f">#{self.b.pk} vision/train-b pending</a>" in card
        assert (
            '<p class="cause-line">project vision quota 8 &lt; 16 needed, cut from 16 by platform-admin</p>'
            in card
        )
        md = self.client.get(f"/handoffs.md?t={T}&w=2h").content.decode()
        assert (
            "train-b pending: project vision quota 8 \\< 16 needed" in md
        )  # the export keeps the whole title

    def test_a_shared_gpu_is_named_by_node_and_index_and_linked(self) -> None:
        record_states(self.cluster, [gpu_obs("h100-03", 4, xid=79)], T0)
        key = f"gpu_xid_fault|gpu/{gpu_uuid('h100-03', 4)}"
        for title in ("job-x pending", "job-y pending"):
            self.incident(title, "critical", 15, key, "gpu_xid_fault")
        got = board.open_problems_with_notes(T0 + timedelta(hours=2)).problems[0]
        assert got.key == key and got.on == "h100-03 GPU 4" and got.subject is not None
        html = self.client.get(f"/handoffs/?t={T}&w=2h").content.decode()
        head = html.split('class="problem-head"')[1].split("</p>")[0]
        assert f'href="/c/gpu-prod/gpus/{gpu_uuid("h100-03", 4)}/?t=' in head and "h100-03 GPU 4" in head
        md = self.client.get(f"/handoffs.md?t={T}&w=2h").content.decode()
        assert "on h100-03 GPU 4 (2 incidents" in md
        assert (
            f"- One cause: `gpu_xid_fault` on [h100-03 GPU 4](http://testserver/c/gpu-prod/gpus/{gpu_uuid('h100-03', 4)}/?t="
            in md
        )

    def test_a_future_cursor_runs_durations_to_now_not_to_t(self) -> None:
        with time_machine.travel("2026-11-29T06:00:00Z", tick=False):
            html = self.client.get("/handoffs/?t=2026-11-29T09:00:00Z&w=2h").content.decode()
            md = self.client.get("/handoffs.md?t=2026-11-29T09:00:00Z&w=2h").content.decode()
        card = html.split(f'id="problem-{self.lone.pk}"')[1].split("</article>")[0]
        assert "open for 2h55m" in card and "5h55m" not in card  # onset 03:05, now 06:00, t 09:00
        assert "Duration: 2h55m (ongoing)" in md and "5h55m" not in md
