"""The pod page's logs panel (web.inventory.pods.pod_logs, collectors.podlogs): read now, bounded, redacted."""

from __future__ import annotations

import threading
from datetime import timedelta
from unittest import mock

from django.test import override_settings

from collectors import podlogs
from collectors.sources.errors import SourceError
from tests.collectors.factories import T0, PageTestCase, iso

PATH = "/c/gpu-prod/pods/nlp/llama-ft-0/logs/"
# What the kubelet answers with timestamps=true: two lines before the crash-loop (T0+2h), one after.
LOG = (
    f"{iso(T0 + timedelta(minutes=100))[:-1]}.123456789Z loading /config/train.yaml\n"
    f"{iso(T0 + timedelta(minutes=110))} KeyError: 'tokenizer_path' password=[redacted]\n"
    f"{iso(T0 + timedelta(minutes=190))} written after the cursor\n"
)


def _kube(**kw):  # type: ignore[no-untyped-def]
    """The collectors' Kubernetes client with its API client stubbed and ``pod_log`` patched (``kw``)."""
    return mock.patch.multiple(
        "collectors.sources.kubernetes.KubeSource", __init__=mock.Mock(return_value=None), **kw
    )


class PodLogsTest(PageTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.addCleanup(mock.patch.stopall)
        mock.patch("collectors.sources.kubernetes.KubeSource.close", create=True).start()

    def test_it_requires_login_and_lets_bob_read(self):
        assert self.get(PATH, self.times["end"], client=self.anon).status_code == 302
        with _kube(pod_log=mock.Mock(return_value=LOG)):
            assert self.get(PATH, self.times["end"], client=self.login_as(self.bob)).status_code == 200

    def test_it_reads_the_previous_log_of_a_crashed_container_through_the_source_cut_at_t(self):
        pod_log = mock.Mock(return_value=LOG)
        t = T0 + timedelta(minutes=150)
        with _kube(pod_log=pod_log):
            r = self.get(PATH, t, headers={"HX-Request": "true"})
        assert r.status_code == 200
        # CrashLoopBackOff at t: the container that died; as of a past t, as much as the source gives
        pod_log.assert_called_once_with(
            "nlp", "llama-ft-0", container="main", previous=True, tail_lines=podlogs.MAX_TAIL, timestamps=True
        )
        html = r.content.decode()
        assert "<html" not in html and 'class="log-form"' in html
        assert "KeyError: &#x27;tokenizer_path&#x27;" in html and "loading /config/train.yaml" in html
        assert "written after the cursor" not in html and "1 written after t left out" in html
        assert "read now" in html.lower() or "Read from the Kubernetes API" in html
        assert "current and the previous container" in html

    def test_it_reads_the_current_container_when_asked(self):
        pod_log = mock.Mock(return_value=LOG)
        with _kube(pod_log=pod_log):
            r = self.get(PATH + "?previous=0&tail=2", self.times["end"])
        assert pod_log.call_args.kwargs["previous"] is False and r.context["log"].previous is False
        assert "of the current" in r.content.decode()

    def test_it_tails_and_searches_and_the_form_keeps_t_and_w(self):
        with _kube(pod_log=mock.Mock(return_value=LOG)):
            r = self.get(PATH + "?previous=1&tail=1", self.times["end"])
            assert [ln.text for ln in r.context["log"].lines] == ["written after the cursor"]
            r = self.get(PATH + "?q=KEYERROR", self.times["end"])
        assert [ln.text for ln in r.context["log"].lines] == [
            "KeyError: 'tokenizer_path' password=[redacted]"
        ]
        html = r.content.decode()
        assert "<html" in html  # without JS, its own page
        assert f'name="t" value="{iso(self.times["end"])}"' in html and 'name="w" value="2h"' in html

    def test_it_downloads_the_lines_shown_as_a_text_file(self):
        with _kube(pod_log=mock.Mock(return_value=LOG)):
            r = self.get(PATH + "?previous=1&q=config&download=1", self.times["end"])
        assert r.status_code == 200 and r["Content-Type"].startswith("text/plain")
        assert r["Content-Disposition"] == 'attachment; filename="llama-ft-0-main-previous.log"'
        assert r.content.decode() == f"{iso(T0 + timedelta(minutes=100))} loading /config/train.yaml\n"

    def test_it_redacts_what_the_source_answers(self):
        # the real source redacts (KubeSource.pod_log); here through it, with the HTTP answer stubbed
        raw = mock.Mock(data=b"2026-11-29T01:50:00Z export DB_PASSWORD=hunter2secret\n")
        with (
            mock.patch("collectors.sources.kubernetes.api_client"),
            mock.patch("collectors.sources.kubernetes.KubeSource._raw", return_value=raw),
        ):
            r = self.get(PATH, self.times["end"])
        html = r.content.decode()
        assert "hunter2secret" not in html and "[redacted]" in html

    def test_a_failing_source_is_a_clear_message_never_a_500(self):
        for exc, words in [
            (
                SourceError("k8s", "log", "forbidden (the service account lacks get/list)", status=403),
                "forbidden",
            ),
            (SourceError("k8s", "log", "not found", status=404), "no longer exists"),
            (
                SourceError(
                    "k8s", "log", 'previous terminated container "main" in pod "x" not found', status=400
                ),
                "has not restarted",
            ),
            (RuntimeError("boom"), "could not be read"),
        ]:
            with _kube(pod_log=mock.Mock(side_effect=exc)):
                r = self.get(PATH, self.times["end"], headers={"HX-Request": "true"})
                assert r.status_code == 200, exc
                assert words in r.content.decode(), (exc, r.content.decode())
                dl = self.get(PATH + "?download=1", self.times["end"])
                assert dl.status_code == 503 and words in dl.content.decode()

    @override_settings(RCAWEB_SOURCE_TIMEOUT_S=0)
    def test_a_slow_source_is_cut_off_at_the_deadline(self):
        release = threading.Event()

        def hang(*a, **kw):  # type: ignore[no-untyped-def]
            release.wait(5)
            return LOG

        with _kube(pod_log=mock.Mock(side_effect=hang)):
            r = self.get(PATH, self.times["end"], headers={"HX-Request": "true"})
        release.set()
        assert r.status_code == 200 and "did not answer within 0 s" in r.content.decode()

    def test_a_deleted_pod_says_its_logs_are_gone_without_asking_the_api(self):
        pod_log = mock.Mock(return_value=LOG)
        with _kube(pod_log=pod_log):
            r = self.get(
                "/c/gpu-prod/pods/nlp/old-sweep-0/logs/", self.times["sweep_gone"] - timedelta(minutes=5)
            )
            live = self.client.get("/c/gpu-prod/pods/nlp/old-sweep-0/logs/")
        assert "no longer exists" in r.content.decode() and "no longer exists" in live.content.decode()
        pod_log.assert_not_called()

    def test_bad_input_is_a_400_and_an_unknown_pod_a_404(self):
        for query in (
            "?tail=0",
            "?tail=99999",
            "?tail=x",
            "?previous=yes",
            "?container=nope",
            "?q=" + "x" * 201,
        ):
            assert self.get(PATH + query, self.times["end"]).status_code == 400, query
        assert self.get("/c/gpu-prod/pods/nlp/nope/logs/", self.times["end"]).status_code == 404


def test_it_parses_kubelet_timestamps_and_keeps_unstamped_lines_with_the_one_before():
    lines = podlogs.parse_lines("2026-11-29T01:00:00.5Z a\ncontinued\n2026-11-29T01:00:01+00:00 b\n")
    assert [(ln.time and ln.time.second, ln.text) for ln in lines] == [(0, "a"), (0, "continued"), (1, "b")]
