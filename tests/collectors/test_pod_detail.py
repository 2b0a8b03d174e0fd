from __future__ import annotations

from datetime import timedelta
from unittest import mock

from tests.collectors.factories import T0, PageTestCase, deepen_history, iso

PATH = "/c/gpu-prod/pods/nlp/llama-ft-0/"


class PodDetailTest(PageTestCase):
    def test_it_requires_login_lets_bob_read_and_swaps_only_the_page_for_htmx(self):
        self.assert_page_basics(PATH, self.times["end"])

    def test_it_links_node_job_queue_project_and_gpus(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        for href in (
            "/c/gpu-prod/nodes/h100-03/",
            "/c/gpu-prod/jobs/nlp/llama-ft/",
            "/c/gpu-prod/queues/nlp/",
            "/c/gpu-prod/projects/nlp/",
            "/c/gpu-prod/gpus/GPU-",
        ):
            assert href in html, href

    def test_it_shows_container_state_last_state_restarts_and_image_as_of_t(self):
        before = self.get(PATH, self.times["cordon"] - timedelta(minutes=5))
        after = self.get(PATH, self.times["cordon"] + timedelta(minutes=5))
        (c0,) = before.context["containers"]
        (c1,) = after.context["containers"]
        assert (c0["state_word"], c0["restart_count"]) == ("running", 0)
        assert (c1["state_word"], c1["state_reason"], c1["restart_count"]) == (
            "waiting",
            "CrashLoopBackOff",
            3,
        )
        assert (c1["last_word"], c1["last_reason"]) == ("terminated", "Error")
        html = after.content.decode()
        assert "registry.local/nlp/llama-ft:1.4" in html and "exit code 1" in html

    def test_it_shows_env_as_stored_redacted(self):
        html = self.get(PATH, self.times["end"]).content.decode()
        assert "WANDB_API_KEY" in html and "[redacted]" in html

    def test_it_shows_conditions_and_events_near_t(self):
        r = self.get("/c/gpu-prod/pods/nlp/bert-eval-0/", self.times["bert_8"])
        html = r.content.decode()
        assert "PodScheduled" in html and "Unschedulable" in html
        assert [e.reason for e in r.context["events"]] == ["FailedScheduling"]
        far = self.get("/c/gpu-prod/pods/nlp/bert-eval-0/", self.times["end"] + timedelta(hours=3))
        assert far.context["events"] == []

    def test_it_says_plainly_when_the_pod_was_deleted_with_a_link_to_when_it_existed(self):
        r = self.get("/c/gpu-prod/pods/nlp/old-sweep-0/", self.times["end"])
        html = r.content.decode()
        assert "did not exist at" in html
        assert r.context["existed_until"] == self.times["sweep_gone"]
        assert "It existed until" in html and "t=2026-11-29T00%3A39%3A59Z" in html

    def test_it_loads_the_logs_lazily_with_the_cursor_and_says_they_are_read_now(self):
        r = self.get(PATH, self.times["end"])
        html = r.content.decode()
        logs = (
            f"/c/gpu-prod/pods/nlp/llama-ft-0/logs/?t={iso(self.times['end']).replace(':', '%3A')}&amp;w=2h"
        )
        assert f'hx-get="{logs}" hx-trigger="load"' in html and f'<a href="{logs}">' in html
        assert "read now from the Kubernetes API, not stored" in html
        assert "current and the previous container" in html

    def test_it_shows_the_yaml_as_of_t_with_the_diff_from_the_version_before(self):
        r = self.get(PATH, self.times["cordon"] + timedelta(minutes=5))
        html = r.content.decode()
        assert "restart_count: 3" in r.context["yaml"] and "WANDB_API_KEY: &#x27;[redacted]&#x27;" in html
        diff = {line: cls for cls, line in r.context["yaml_diff"]}
        assert diff["-  restart_count: 0"] == "del" and diff["+  restart_count: 3"] == "add"
        assert diff["+      reason: CrashLoopBackOff"] == "add" and 'class="add">+  restart_count: 3' in html
        assert r.context["yaml_previous"].valid_from == T0 + timedelta(minutes=15)  # it started running
        first = self.get(PATH, T0 + timedelta(minutes=16))
        assert first.context["yaml_previous"] is None and "first recorded version" in first.content.decode()

    def test_it_shows_the_container_state_history_up_to_t_newest_first(self):
        r = self.get(PATH, self.times["end"])
        steps = r.context["state_history"]
        assert [s.status for s in steps] == ["CrashLoopBackOff", "Running"]
        assert steps[0].containers[0].restarts == 3 and steps[0].containers[0].last_reason == "Error"
        assert "containers" in steps[0].changed and steps[1].changed == []
        assert "2 restarts" not in r.content.decode() and "3 restarts" in r.content.decode()

    def test_its_queries_do_not_grow_with_history_and_logs_never_delay_it(self):
        with mock.patch("collectors.podlogs.read_log") as read_log:
            # session, user, entity + errors, GPUs, events, versions, related, changes, incidents
            with self.assertNumQueries(9):
                self.get(PATH, self.times["end"])
            deepen_history(self.cluster, self.times["end"] + timedelta(minutes=1), versions=30)
            later = self.times["end"] + timedelta(hours=1)
            with self.assertNumQueries(9):
                r = self.get(PATH, later)
        read_log.assert_not_called()
        assert len(r.context["state_history"]) == 20
