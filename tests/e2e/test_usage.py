"""Request vs usage in the browser: the fleet page links the "allocated but barely used" page at the cursor, and
the job page's usage panel loads after the page.

The e2e server's scenario has finished, so its simulated Prometheus is gone: both must say Prometheus did not
answer, in the page, without an error (with a live Prometheus, bench/usage.py --shot photographs them full).
Screenshots: artifacts/e2e/usage*.png.
"""

from __future__ import annotations

import pytest

from tests.e2e.browser import Session, click_and_load, goto, screenshot, url_params, url_path

pytestmark = pytest.mark.e2e

T = "2026-11-29T00:14:00Z"
Q = f"?t={T}&w=2h"


def test_the_fleet_page_leads_to_the_usage_page_at_the_cursor(alice: Session) -> None:
    page = alice.page
    goto(page, alice.url("/fleet/" + Q))
    click_and_load(page, "a[href^='/c/gpu-prod/usage/']")
    assert url_path(page.url) == "/c/gpu-prod/usage/"
    assert url_params(page.url) == {"t": T, "w": "2h"}
    main = page.locator("main").inner_text()
    assert "GPUs allocated but barely used" in main and "Prometheus did not answer" in main
    screenshot(page, alice.live.artifacts, "usage")


def test_the_job_pages_usage_panel_loads_after_it(alice: Session) -> None:
    page = alice.page
    goto(page, alice.url("/c/gpu-prod/jobs/llm/llama-ft/" + Q))
    panel = page.locator("#usage")
    assert panel.count() == 1 and "Loading requests vs usage" not in panel.inner_text()
    assert "Requests vs usage" in panel.inner_text() and "Prometheus did not answer" in panel.inner_text()
    panel.screenshot(path=str(alice.live.artifacts / "usage-job-panel.png"))
