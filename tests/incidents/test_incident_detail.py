"""The incident page: facts as of the cursor (default: onset), timeline, evidence, actions for responders only."""

from __future__ import annotations

import re
from datetime import timedelta
from unittest import mock

from django.db import connection
from django.test.utils import CaptureQueriesContext

from collectors.models import KubeEvent
from incidents.evidence import collect_evidence
from incidents.grouping import group_alert
from incidents.intake import ingest_alertmanager
from incidents.models import Alert, AuditEntry, Citation, DiagnosisRun, Hypothesis, Incident, Observation
from incidents.services import allowed_transitions
from tests.base import T0, BaseTestCase
from tests.incidents.fixtures.alertmanager import alert, payload, small_world

NOW = T0 + timedelta(minutes=30)


class IncidentPageTestCase(BaseTestCase):
    def setUp(self) -> None:
        super().setUp()
        small_world(self.cluster, T0)
        KubeEvent.objects.create(
            cluster=self.cluster,
            uid="ev-1",
            count=1,
            namespace="vision",
            involved_kind="Pod",
            involved_name="resnet-train-0",
            involved_namespace="vision",
            reason="FailedScheduling",
            message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
            type="Warning",
            first_time=T0 - timedelta(minutes=12),
            last_time=T0 - timedelta(minutes=12),
        )
        body = alert(
            "GPUJobPendingTooLong",
            {"cluster": "gpu-prod", "namespace": "vision", "job_name": "resnet-train"},
            T0,
        )
        ingest_alertmanager(payload([body]))
        self.incident = group_alert(Alert.objects.get())
        collect_evidence(self.incident.pk, now=NOW)
        self.url = self.incident.get_absolute_url()


class IncidentDetailTests(IncidentPageTestCase):
    def test_it_redirects_anonymous_users_to_login(self) -> None:
        r = self.anon.get(self.url)
        self.assertEqual(r.status_code, 302)
        self.assertIn("/accounts/login/", r["Location"])

    def test_it_shows_status_subjects_alerts_timeline_and_evidence(self) -> None:
        r = self.client.get(self.url)
        self.assertEqual(r.status_code, 200)
        html = r.content.decode()
        self.assertIn("GPUJobPendingTooLong", html)
        self.assertIn(
            'href="/c/gpu-prod/jobs/vision/resnet-train/?t=2026-11-29T03%3A00%3A00Z&amp;w=2h"', html
        )
        self.assertIn("12m before", html)  # the event, relative to the onset
        self.assertIn("FailedScheduling", html)
        self.assertIn('id="cursor-anchor"', html)
        # the first view carries the cited evidence; every observation is one click (or htmx swap) away
        self.assertIn("Show all", html)
        self.assertNotIn("/api/v1/namespaces/vision/pods/resnet-train-0", html.split('id="evidence"')[1])
        every = self.client.get(self.url + "?evidence=all").content.decode()
        self.assertIn("/api/v1/namespaces/vision/pods/resnet-train-0", every)  # provenance: the locator
        swapped = self.client.get(
            self.url + "?evidence=all", headers={"HX-Request": "true", "HX-Target": "evidence"}
        )
        self.assertIn("/api/v1/namespaces/vision/pods/resnet-train-0", swapped.content.decode())

    def test_the_timeline_folds_what_repeats_and_what_overflows(self) -> None:
        from web.incidents.timeline import TIMELINE_SHOWN

        Observation.objects.bulk_create(
            [
                Observation(
                    incident=self.incident,
                    source="k8s",
                    kind="event",
                    locator=f"/e/{i}",
                    observed_at=T0 + timedelta(minutes=5 * i),
                    collected_at=NOW,
                    summary="Warning Unschedulable on pod resnet-train-0: gang of 2 waits",
                    dedup_key=f"rep:{i}",
                )
                for i in range(30)
            ]
            + [
                Observation(
                    incident=self.incident,
                    source="k8s",
                    kind="event",
                    locator=f"/d/{i}",
                    observed_at=T0 + timedelta(minutes=i, seconds=7),
                    collected_at=NOW,
                    summary=f"Normal Pulled on pod p-{i}",
                    dedup_key=f"dist:{i}",
                )
                for i in range(TIMELINE_SHOWN + 5)
            ]
        )
        html = self.client.get(self.url).content.decode()
        timeline = html.split('id="timeline"')[1].split("</section>")[0]
        i = timeline.index("gang of 2 waits")
        assert timeline.count("gang of 2 waits") == 1 and "×30 until 05:25" in timeline, timeline[i : i + 300]
        first, _, folded = timeline.partition('class="folded"')
        assert first.count('<tr class="tl-') == TIMELINE_SHOWN and "more rows" in folded
        assert folded.count('<tr class="tl-') > 5

    def test_it_defaults_the_cursor_to_the_onset_and_keeps_it_in_every_link(self) -> None:
        html = self.client.get(self.url).content.decode()
        # The cursor bar's "now" button is the one link that drops t, by design (it means "live").
        html = re.sub(r'<a class="btn" id="cursor-live"[^>]*>', "", html)
        internal = [
            h
            for h in re.findall(r'href="([^"]+)"', html)
            if h.startswith("/") and not h.startswith("/static/")
        ]
        internal = [h for h in internal if not h.startswith(("/accounts/",))]
        self.assertTrue(internal)
        for href in internal:
            self.assertIn("t=", href, href)
        self.assertIn('data-t="2026-11-29T03:00:00Z"', html)

    def test_it_renders_as_of_the_cursor_when_one_is_given(self) -> None:
        html = self.client.get(self.url + "?t=2026-11-29T03:20:00Z").content.decode()
        self.assertIn('data-t="2026-11-29T03:20:00Z"', html)
        self.assertIn("/c/gpu-prod/jobs/vision/resnet-train/?t=2026-11-29T03%3A20%3A00Z", html)

    def test_it_rejects_a_malformed_cursor(self) -> None:
        self.assertEqual(self.client.get(self.url + "?t=yesterday").status_code, 400)

    def test_it_shows_action_buttons_to_responders_only(self) -> None:
        self.assertIn('name="status" value="investigating"', self.client.get(self.url).content.decode())
        html = self.login_as(self.bob).get(self.url).content.decode()
        self.assertNotIn('name="status"', html)
        self.assertNotIn('name="ack"', html)

    def test_its_status_buttons_match_the_status(self) -> None:
        for status, want in (
            (
                "open",
                [
                    ("investigating", "Mark investigating"),
                    ("mitigated", "Mark mitigated"),
                    ("resolved", "Mark resolved"),
                ],
            ),
            (
                "acknowledged",
                [
                    ("investigating", "Mark investigating"),
                    ("mitigated", "Mark mitigated"),
                    ("resolved", "Mark resolved"),
                    ("open", "Back to open"),
                ],
            ),
            (
                "mitigated",
                [
                    ("investigating", "Back to investigating"),
                    ("resolved", "Mark resolved"),
                    ("open", "Back to open"),
                ],
            ),
            ("resolved", [("open", "Reopen")]),
        ):
            with self.subTest(status):
                Incident.objects.filter(pk=self.incident.pk).update(status=status)
                html = self.client.get(self.url).content.decode()
                got = re.findall(
                    r'<button class="btn[^"]*" type="submit" name="status" value="([a-z]+)">([^<]+)</button>',
                    html,
                )
                self.assertEqual(got, want)
                allowed = [
                    s for s in allowed_transitions(status) if not (status == "open" and s == "acknowledged")
                ]
                self.assertEqual([s for s, _ in got], allowed)
                self.assertEqual("Reopen" in html, status == "resolved")
                self.assertEqual('name="ack"' in html, status == "open")

    def test_it_forbids_viewers_to_post(self) -> None:
        r = self.login_as(self.bob).post(self.url, {"status": "resolved"})
        self.assertEqual(r.status_code, 403)
        self.assertEqual(Incident.objects.get().status, "open")
        self.assertEqual(AuditEntry.objects.count(), 0)

    def test_it_changes_status_with_post_redirect_get_and_audits_it(self) -> None:
        r = self.client.post(self.url, {"status": "investigating"})
        self.assertEqual(r.status_code, 302)
        self.assertEqual(r["Location"], self.url + "?t=2026-11-29T03%3A00%3A00Z&w=2h")
        self.assertEqual(Incident.objects.get().status, "investigating")
        entry = AuditEntry.objects.get()
        self.assertEqual(
            (entry.user_name, entry.before, entry.after),
            ("alice", {"status": "open"}, {"status": "investigating"}),
        )
        history = self.client.get(f"/incidents/{self.incident.pk}/history/").content.decode()
        self.assertIn("incident.status", history)
        self.assertIn("investigating", history)

    def test_it_answers_400_to_an_impossible_transition(self) -> None:
        r = self.client.post(self.url, {"status": "open"})
        self.assertEqual(r.status_code, 400)
        self.assertEqual(self.client.post(self.url, {"status": "exploded"}).status_code, 400)

    def test_it_needs_a_csrf_token_to_post(self) -> None:
        from django.test import Client

        c = Client(enforce_csrf_checks=True)
        c.force_login(self.alice)
        self.assertEqual(c.post(self.url, {"status": "resolved"}).status_code, 403)

    def test_it_acknowledges_and_sets_the_owner(self) -> None:
        self.client.post(self.url, {"ack": "1"})
        inc = Incident.objects.get()
        self.assertEqual((inc.owner, inc.status), ("alice", "acknowledged"))
        self.client.post(self.url, {"owner": "carol"})
        self.assertEqual(Incident.objects.get().owner, "carol")

    def test_it_returns_only_the_status_fragment_to_htmx_posts(self) -> None:
        r = self.client.post(
            self.url, {"status": "mitigated"}, headers={"HX-Request": "true", "HX-Target": "status-panel"}
        )
        html = r.content.decode()
        self.assertEqual(r.status_code, 200)
        self.assertTrue(html.strip().startswith('<section class="panel" id="status-panel">'))
        self.assertNotIn("<html", html)

    def test_it_returns_only_the_evidence_fragment_to_htmx(self) -> None:
        r = self.client.get(self.url + "?page=1", headers={"HX-Request": "true", "HX-Target": "evidence"})
        html = r.content.decode()
        self.assertTrue(html.strip().startswith('<section class="panel" id="evidence">'))
        self.assertNotIn("cursor-bar", html)

    def test_it_polls_collection_progress_until_done_then_stops(self) -> None:
        Incident.objects.filter(pk=self.incident.pk).update(collection_state="running")
        html = self.client.get(self.url).content.decode()
        self.assertIn('hx-trigger="every 2s"', html)
        r = self.client.get(self.url, headers={"HX-Request": "true", "HX-Target": "collection-progress"})
        self.assertEqual(r.status_code, 200)
        self.assertIn("Collecting evidence", r.content.decode())
        Incident.objects.filter(pk=self.incident.pk).update(collection_state="done")
        r = self.client.get(self.url, headers={"HX-Request": "true", "HX-Target": "collection-progress"})
        self.assertEqual(r.status_code, 286)  # HttpResponseStopPolling
        self.assertNotIn("every 2s", r.content.decode())

    def test_it_shows_hypotheses_with_their_evidence(self) -> None:
        obs = Observation.objects.filter(incident=self.incident, kind="event").first()
        h = Hypothesis.objects.create(
            incident=self.incident,
            code="gpu_capacity_shortage",
            status="supported",
            confidence=0.6,
            statement="No node has 8 free GPUs",
            next_questions=["Which jobs hold them?"],
        )
        Citation.objects.create(hypothesis=h, observation=obs)
        html = self.client.get(self.url).content.decode()
        self.assertIn("gpu_capacity_shortage", html)
        self.assertIn("Which jobs hold them?", html)
        self.assertIn(f"#obs-{obs.pk}", html)

    def test_its_query_count_does_not_grow_with_the_observations(self) -> None:
        def count() -> int:
            with CaptureQueriesContext(connection) as ctx:
                self.assertEqual(self.client.get(self.url).status_code, 200)
            return len(ctx.captured_queries)

        before = count()
        Observation.objects.bulk_create(
            [
                Observation(
                    incident=self.incident,
                    source="k8s",
                    kind="event",
                    locator="/x",
                    observed_at=T0 + timedelta(seconds=i),
                    collected_at=NOW,
                    summary=f"event {i}",
                    dedup_key=f"bulk:{i}",
                    content={"reason": "x"},
                )
                for i in range(400)
            ]
        )
        self.assertEqual(count(), before)
        with self.assertNumQueries(before):
            self.client.get(self.url)
        self.assertLessEqual(
            before, 22
        )  # session, user, roles, incident, diagnoses kept, lifecycle, subjects, versions, ...

    def test_it_paginates_the_evidence(self) -> None:
        Observation.objects.bulk_create(
            [
                Observation(
                    incident=self.incident,
                    source="k8s",
                    kind="event",
                    locator="/x",
                    observed_at=T0 + timedelta(seconds=i),
                    collected_at=NOW,
                    summary=f"bulk event {i}",
                    dedup_key=f"bulk:{i}",
                )
                for i in range(120)
            ]
        )
        html = self.client.get(self.url + "?kind=event&page=3").content.decode()
        self.assertIn("page 3 of 3", html)
        self.assertIn(
            f'href="/incidents/{self.incident.pk}/?kind=event&amp;page=2&amp;t=2026-11-29T03%3A00%3A00Z',
            html,
        )

    def test_it_shows_unresolved_subjects(self) -> None:
        ingest_alertmanager(payload([alert("Mystery", {"node": "h100-77"}, T0)]))
        inc = group_alert(Alert.objects.get(name="Mystery"))
        html = self.client.get(inc.get_absolute_url()).content.decode()
        self.assertIn("node=h100-77", html)
        self.assertIn("unresolved", html)

    def test_it_404s_for_an_unknown_incident(self) -> None:
        self.assertEqual(self.client.get("/incidents/999999/").status_code, 404)

    def test_it_polls_nothing_for_a_collected_incident(self) -> None:
        with mock.patch("web.incidents.views.neighbour_change_times", return_value=(None, None)):
            html = self.client.get(self.url).content.decode()
        self.assertNotIn("every 2s", html)


class TimelineTests(IncidentPageTestCase):
    def test_it_links_each_timeline_row_to_its_entity_at_that_time(self) -> None:
        r = self.client.get(self.url, headers={"HX-Request": "true", "HX-Target": "timeline"})
        html = r.content.decode()
        self.assertTrue(html.strip().startswith('<section class="panel" id="timeline">'))
        # the FailedScheduling event 12 minutes before onset links to the pod as of 02:48
        self.assertIn(
            'href="/c/gpu-prod/pods/vision/resnet-train-0/?t=2026-11-29T02%3A48%3A00Z&amp;w=2h"', html
        )
        self.assertIn("GPUJobPendingTooLong fired", html)


class HistoryTests(IncidentPageTestCase):
    def test_it_redirects_anonymous_users(self) -> None:
        self.assertEqual(self.anon.get(f"/incidents/{self.incident.pk}/history/").status_code, 302)

    def test_it_lists_who_changed_what_for_viewers_too(self) -> None:
        self.client.post(self.url, {"status": "investigating"})
        self.client.post(self.url, {"owner": "alice"})
        html = self.login_as(self.bob).get(f"/incidents/{self.incident.pk}/history/").content.decode()
        self.assertIn("Status changed from open to investigating.", html)
        self.assertIn("Owner set to alice.", html)
        self.assertNotIn("{&#x27;status&#x27;", html)  # sentences, not the stored dicts
        self.assertNotIn('name="status"', html)

    def test_its_query_count_is_bounded(self) -> None:
        for s in ("investigating", "mitigated", "resolved", "open", "resolved"):
            self.client.post(self.url, {"status": s})
        with self.assertNumQueries(6):
            self.client.get(f"/incidents/{self.incident.pk}/history/")


class AlertDetailTests(IncidentPageTestCase):
    def test_it_shows_the_alert_and_links_its_incident_at_onset(self) -> None:
        a = Alert.objects.get()
        html = self.client.get(f"/alerts/{a.pk}/").content.decode()
        self.assertIn("job_name", html)
        self.assertIn(f'href="/incidents/{self.incident.pk}/?t=2026-11-29T03%3A00%3A00Z', html)
        self.assertEqual(self.anon.get(f"/alerts/{a.pk}/").status_code, 302)


class RelatedIncidentFoldTest(IncidentPageTestCase):
    def test_related_incidents_with_one_title_are_one_row_with_their_count(self) -> None:
        for i in range(25):
            other = Incident.objects.create(
                title="a100-07 GPUJobPendingTooLong",
                cluster=self.incident.cluster,
                onset=T0 + timedelta(minutes=i),
                window_start=T0,
            )
            self.incident.related.add(other)
        html = self.client.get(self.url).content.decode()
        block = html.split("<h3>Related incidents</h3>")[1].split("</ul>")[0]
        assert block.count("a100-07 GPUJobPendingTooLong") == 1 and "×25 since 03:00" in block

    def test_related_incidents_waiting_for_their_own_quota_are_counted_apart_by_problem(self) -> None:
        # A failed node relates every job that might have run on it; those whose own diagnosis says their
        # quota holds them would not start when it is back: one line per problem, not a row each.
        def related(title: str, cause_key: str, minute: int) -> None:
            other = Incident.objects.create(
                title=title,
                cluster=self.incident.cluster,
                onset=T0 + timedelta(minutes=minute),
                window_start=T0,
                cause_key=cause_key,
            )
            self.incident.related.add(other)

        for i in range(12):
            related(
                f"nlp/batch-{i} pending: project nlp limit 96 < 104 needed",
                "project_quota_exhausted|project/nlp",
                i,
            )
        related("vision/batch-1 pending: queue vision waits", "queue_priority|queue/vision", 20)
        related(
            "research/exp-39 pending: would fit if h100-03 were fixed",
            "gpu_node_unavailable|node/h100-03",
            21,
        )
        html = self.client.get(self.url).content.decode()
        rows = html.split("<h3>Related incidents</h3>")[1].split("</ul>")[0]
        self.assertIn("research/exp-39", rows)
        self.assertNotIn("nlp/batch-", rows)
        held = html.split('id="related-held"')[1].split("</p>")[0]
        self.assertIn('href="/incidents/?cause=project_quota_exhausted%7Cproject%2Fnlp"', held)
        self.assertIn("project nlp ×12", held)
        self.assertIn("queue vision ×1", held)
        self.assertLess(held.index("project nlp"), held.index("queue vision"))  # the largest first


class CrashLoopSubjectTests(BaseTestCase):
    def test_a_crash_looping_pod_reads_as_on_its_own_page_not_as_its_phase(self) -> None:
        """Kubernetes keeps a crash-looping pod in phase Running; the incident page says CrashLoopBackOff, as the
        pod page and kubectl do (one pod, one story)."""
        from collectors.inventory import Observed, record_states

        small_world(self.cluster, T0, pending_job=False)
        state = {
            "phase": "Running",
            "node": "h100-01",
            "job": "serve",
            "containers": [
                {"name": "main", "ready": False, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
            ],
        }
        record_states(
            self.cluster,
            [Observed("pod", "serve-0", state, namespace="nlp", hot={"phase": "Running", "node": "h100-01"})],
            T0 - timedelta(minutes=20),
        )
        body = alert("PodCrashLooping", {"cluster": "gpu-prod", "namespace": "nlp", "pod": "serve-0"}, T0)
        ingest_alertmanager(payload([body]))
        incident = group_alert(Alert.objects.get())
        html = self.client.get(incident.get_absolute_url()).content.decode()
        subjects = html[html.index('id="subjects"') :][:2000]
        self.assertIn("CrashLoopBackOff", subjects)
        self.assertNotIn(">Running<", subjects)

    def test_a_crash_loop_answer_links_the_pod_troubleshooter_first(self) -> None:
        from collectors.inventory import Observed, record_states
        from collectors.models import Entity

        small_world(self.cluster, T0, pending_job=False)
        state = {
            "phase": "Running",
            "containers": [{"name": "main", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}],
        }
        record_states(
            self.cluster,
            [Observed("pod", "serve-0", state, namespace="nlp", hot={"phase": "Running"})],
            T0 - timedelta(minutes=20),
        )
        body = alert("PodCrashLooping", {"cluster": "gpu-prod", "namespace": "nlp", "pod": "serve-0"}, T0)
        ingest_alertmanager(payload([body]))
        incident = group_alert(Alert.objects.get())
        DiagnosisRun.objects.create(
            incident=incident, at=incident.onset, made_at=incident.onset, top_code="crashloop_config_error"
        )
        h = Hypothesis.objects.create(
            incident=incident,
            code="crashloop_config_error",
            status="supported",
            confidence=0.8,
            statement="main exits 1: FileNotFoundError",
            subject=Entity.objects.get(kind="pod", name="serve-0"),
        )
        html = self.client.get(incident.get_absolute_url()).content.decode()
        answer = html[html.index('id="answer"') :][:3000]
        self.assertIn('href="/c/gpu-prod/pods/nlp/serve-0/?t=', answer)
        self.assertIn('#pod-logs">Troubleshoot pod nlp/serve-0</a>', answer)
        h.code = "gpu_capacity_shortage"
        h.save()
        html = self.client.get(incident.get_absolute_url()).content.decode()
        self.assertNotIn("Troubleshoot pod", html)
