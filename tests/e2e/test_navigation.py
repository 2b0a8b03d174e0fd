"""Flow 1 (issue #5): log in, open the incident from the console, walk job → queue → project → job → node → GPU.

At every step the URL keeps the incident's ``t`` and ``w``, the cursor bar shows that time, and the page
shows the state valid at that time. A second test counts the clicks from the console to a GPU's telemetry.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import Page

from tests.e2e import server as srv
from tests.e2e.browser import (
    Session,
    as_of,
    bar_t,
    bar_window,
    click_and_load,
    parse_z,
    settle,
    url_params,
    url_path,
)

pytestmark = pytest.mark.e2e

logger = logging.getLogger(__name__)


@dataclass
class Walk:
    """Clicks made on one page (each a full page load), with the cursor checked after each."""

    page: Page
    t: str = ""
    w: str = ""
    clicks: int = 0
    trail: list[str] = field(default_factory=list)

    def click(self, selector: str, expect_path: str) -> None:
        click_and_load(self.page, selector)
        self.clicks += 1
        self.trail.append(url_path(self.page.url))
        assert url_path(self.page.url) == expect_path, (
            f"click {self.clicks} ({selector}) led to {self.page.url}"
        )
        self.assert_cursor_kept()

    def assert_cursor_kept(self) -> None:
        params = url_params(self.page.url)
        assert params.get("t") == self.t, f"{self.page.url} lost the incident's t={self.t}"
        assert params.get("w") == self.w, f"{self.page.url} lost the incident's w={self.w}"
        assert bar_t(self.page) == self.t, f"the cursor bar of {self.page.url} shows another time"
        assert bar_window(self.page) == self.w
        assert_state_at(self.page, self.t)


def assert_state_at(page: Page, t: str) -> None:
    """The entity heading says "as of t", and the version shown was valid at t (valid_from <= t < valid_to)."""
    assert as_of(page) == t, f"{page.url} heading is as of {as_of(page)}, not {t}"
    since = page.locator("main .ent-head p.since time[datetime]")
    assert since.count() >= 1, f"{page.url} shows no state at {t}: {page.locator('main').inner_text()[:300]}"
    assert parse_z(since.first.get_attribute("datetime") or "") <= parse_z(t)
    if since.count() > 1:  # "until <valid_to>"
        assert parse_z(since.nth(1).get_attribute("datetime") or "") > parse_z(t)


def open_incident_from_console(session: Session) -> Walk:
    page = session.page
    incident = session.live.incident
    walk = Walk(page)
    click_and_load(page, f"#panel-incidents a[href^='{incident['url']}']")
    walk.clicks += 1
    assert url_path(page.url) == incident["url"]
    # The console is live; the incident page without t opens at the incident's onset.
    onset = page.locator("#status-panel time[datetime]").first.get_attribute("datetime") or ""
    walk.t, walk.w = bar_t(page), bar_window(page)
    assert walk.t == onset, f"incident page opened at {walk.t}, its onset is {onset}"
    assert page.locator("#hypotheses, .hypotheses").first.is_visible()
    return walk


def test_it_logs_in_and_walks_from_the_incident_to_a_gpu_keeping_the_cursor(anon: Session) -> None:
    page = anon.page
    page.goto(anon.url("/"))
    assert url_path(page.url) == "/accounts/login/", "an anonymous visitor must land on the login form"
    page.fill("input[name=username]", srv.USERNAME)
    page.fill("input[name=password]", srv.PASSWORD)
    with page.expect_navigation(wait_until="load"):
        page.click("main button[type=submit]")
    settle(page)
    assert page.url == anon.url("/")
    assert page.locator("header .user").inner_text().startswith(srv.USERNAME)

    walk = open_incident_from_console(anon)
    job = next(s for s in anon.live.incident["subjects"] if s["kind"] == "job")
    cluster, ns, name = job["cluster"], job["namespace"], job["name"]
    job_path = f"/c/{cluster}/jobs/{ns}/{name}/"
    incident_subject = page.locator("#subjects tr", has=page.locator("a.ent-job")).first
    job_phase = incident_subject.locator("td").nth(2).inner_text()

    walk.click(f"#subjects a.ent-job[href^='{job_path}']", job_path)
    assert job_phase in page.locator("main").inner_text(), (
        "the job page disagrees with the incident about its phase"
    )
    queue = page.locator("main a.ent-queue").first.inner_text()
    walk.click("main a.ent-queue", f"/c/{cluster}/queues/{queue}/")
    project = page.locator("main a.ent-project").first.inner_text()
    walk.click("main a.ent-project", f"/c/{cluster}/projects/{project}/")
    walk.click(f"main a.ent-job[href^='{job_path}']", job_path)
    runs_on = page.locator("main tr", has_text="Runs on").locator("a.ent-node")
    node = runs_on.first.inner_text()
    walk.click(f"main a.ent-node[href^='/c/{cluster}/nodes/{node}/']", f"/c/{cluster}/nodes/{node}/")
    gpu_link = page.locator("main a.ent-gpu").first
    gpu = gpu_link.inner_text()
    walk.click(f"main a.ent-gpu[href^='/c/{cluster}/gpus/{gpu}/']", f"/c/{cluster}/gpus/{gpu}/")
    assert_gpu_telemetry(page, node)
    logger.info("walk: %s", " → ".join(walk.trail))
    assert walk.clicks == 7


def assert_gpu_telemetry(page: Page, node: str) -> None:
    """The GPU page names its node and draws its DCGM telemetry (a chart with points, the cursor line at t)."""
    assert page.locator("main a.ent-node").first.inner_text() == node
    chart = page.locator(".plotly-chart[data-rendered][aria-label*='utilization' i]").first
    assert chart.is_visible(), f"no utilization chart on {page.url}"
    points = chart.evaluate("(el) => el.data.reduce((n, tr) => n + (tr.x ? tr.x.length : 0), 0)")
    assert points > 0, f"the telemetry chart on {page.url} has no samples"


def test_it_reaches_a_gpus_telemetry_from_the_console_in_at_most_four_clicks(alice: Session) -> None:
    page = alice.page
    page.goto(alice.url("/"))
    settle(page)
    walk = open_incident_from_console(alice)
    # The incident lists the GPUs its subject holds (Related): console → incident → GPU.
    gpu = page.locator("#subjects a.ent-gpu").first
    uuid = gpu.inner_text()
    walk.click(f"#subjects a.ent-gpu[href*='/gpus/{uuid}/']", url_path(gpu.get_attribute("href") or ""))
    node = page.locator("main a.ent-node").first.inner_text()
    assert_gpu_telemetry(page, node)
    shortest = walk.clicks

    # The operator's usual path: console → incident → job → the node it runs on → a GPU.
    page.goto(alice.url("/"))
    settle(page)
    walk = open_incident_from_console(alice)
    walk.click(
        "#subjects a.ent-job", url_path(page.locator("#subjects a.ent-job").first.get_attribute("href") or "")
    )
    walk.click("main tr:has-text('Runs on') a.ent-node", f"/c/gpu-prod/nodes/{node}/")
    gpu_path = url_path(page.locator("main a.ent-gpu").first.get_attribute("href") or "")
    walk.click("main a.ent-gpu", gpu_path)
    assert_gpu_telemetry(page, node)
    via_job = walk.clicks
    logger.warning(
        "clicks from the console to a GPU's telemetry: %d via Related, %d via job → node", shortest, via_job
    )
    (alice.live.artifacts / "clicks.txt").write_text(
        f"console → incident → GPU: {shortest} clicks\nconsole → incident → job → node → GPU: {via_job} clicks\n"
    )
    assert shortest <= 4
    assert via_job <= 4
