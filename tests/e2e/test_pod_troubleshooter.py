"""The pod troubleshooter in the browser: from the crash-loop incident's answer to the pod's page, whose logs load
after the page (read now from the Kubernetes API), with its YAML diff and container state history.

The e2e server's scenario has finished, so its simulated API server is gone: the logs panel must say the log
cannot be read now, in the page, without an error. Screenshots: artifacts/e2e/pod-troubleshooter*.png.
"""

from __future__ import annotations

import pytest

from tests.e2e.browser import Session, click_and_load, goto, screenshot, url_params, url_path

pytestmark = pytest.mark.e2e


def test_the_answer_leads_to_the_pod_page_whose_logs_load_after_it(alice: Session) -> None:
    page = alice.page
    goto(page, alice.url(alice.live.incident["url"]))
    incident_t = url_params(page.url).get("t") or page.locator("#cursor-bar").get_attribute("data-t")
    link = page.locator("#answer .answer-troubleshoot a").first
    assert link.count() == 1, "the crash-loop answer does not link its pod's troubleshooter"
    click_and_load(page, "#answer .answer-troubleshoot a")
    assert url_path(page.url).startswith("/c/gpu-prod/pods/llm/llama-ft-"), page.url
    assert url_params(page.url).get("t") == incident_t  # still at the incident's moment

    # the logs panel: loaded by htmx after the page, saying where logs come from and why there are none now
    panel = page.locator("#pod-log-panel")
    panel.locator("form.log-form").wait_for()
    about = panel.locator(".log-about").inner_text()
    assert "the Kubernetes API at" in about and "current and the previous container" in about
    error = panel.locator("#log-error")
    assert error.count() == 1 and "cannot be read now" in error.inner_text(), panel.inner_text()[:500]

    # YAML as of t with what changed, and the container state history
    assert "restart_count" in page.locator("#pod-yaml pre.diff").inner_text()
    assert page.locator("#pod-yaml pre.diff .add").count() >= 1
    history = page.locator("#pod-history tbody tr")
    assert history.count() >= 2 and "CrashLoopBackOff" in page.locator("#pod-history").inner_text()
    screenshot(page, alice.live.artifacts, "pod-troubleshooter")

    # a search re-reads in place: the page stays, the panel is swapped, the cursor is kept
    before = page.url
    panel.locator("input[name=q]").fill("CUDA")
    with page.expect_response(lambda r: "/logs/" in r.url and "q=CUDA" in r.url and "t=" in r.url):
        panel.locator("button[type=submit]").click()
    panel.locator("form.log-form").wait_for()
    assert page.url == before
    assert panel.locator("input[name=q]").input_value() == "CUDA"
    assert page.locator("#pod-log-panel").count() == 1 and page.locator("#pod-yaml").count() == 1


def test_without_js_the_logs_are_a_page_of_their_own(alice: Session) -> None:
    page = alice.page
    goto(page, alice.url(alice.live.incident["url"]))
    click_and_load(page, "#answer .answer-troubleshoot a")
    href = page.locator("#pod-log-panel").get_attribute("hx-get")
    assert href and "t=" in href
    goto(page, alice.url(href.replace("&amp;", "&")))
    assert "container logs" in page.locator("h1").inner_text()
    assert page.locator("#pod-log-panel form.log-form").count() == 1
