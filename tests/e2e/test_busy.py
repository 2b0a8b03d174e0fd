"""The console on a busy cluster (issue: incidents workable), in Debian's chromium at 1280×900.

The world is a busy bundled scenario (tests/e2e/server.py ``BUSY``: overlapping GPU, node, workload and
efficiency faults on 18 nodes) run through the real pipeline. Every incident page must put its answer in
the first screen, never scroll sideways and stay within five screens; the console never shows a refuted
hypothesis as an incident's top; a GPU is at most four clicks from the console for a pending and for a
running job's incident. Screenshots of every incident page land in artifacts/e2e/busy-*.png.
"""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from playwright.sync_api import Page

from tests.e2e.browser import LAPTOP, Session, click_and_load, goto, parse_z, screenshot, settle, url_path

pytestmark = pytest.mark.e2e

logger = logging.getLogger(__name__)

SCREENS = 5


def at(moment: str, minutes: int = 1) -> str:
    return (parse_z(moment) + timedelta(minutes=minutes)).strftime("%Y-%m-%dT%H:%M:%SZ")


def incident_of(bob: Session, kind: str, name: str) -> dict:
    return next(
        i
        for i in bob.live.run["incidents"]
        if any(s["kind"] == kind and s["name"] == name for s in i["subjects"])
    )


def test_every_incident_page_answers_in_the_first_screen_without_sideways_scroll(bob: Session) -> None:
    page = bob.page
    shapes = []
    for inc in bob.live.run["incidents"]:
        goto(page, bob.url(inc["url"]))
        cause = page.locator("#answer .answer-cause")
        assert cause.count() == 1, f"{inc['url']} has no answer"
        box = cause.bounding_box()
        assert box is not None and box["y"] + box["height"] <= LAPTOP["height"], (
            f"{inc['url']}: the answer ends at y={box and box['y'] + box['height']:.0f}, below the first screen"
        )
        top = next((h for h in inc["hypotheses"] if h["status"] == "supported"), None)
        if top is not None:  # the first supported cause is the one the answer names
            assert top["code"] in cause.inner_text(), (inc["url"], cause.inner_text(), top["code"])
        width, client = page.evaluate(
            "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        height = page.evaluate("document.documentElement.scrollHeight")
        shapes.append(
            f"{inc['url']} height {height} px ({height / LAPTOP['height']:.1f} screens) width {width}"
        )
        screenshot(page, bob.live.artifacts, f"busy-incident-{inc['id']}")
        assert width <= client, f"{inc['url']} scrolls sideways: {width} > {client} px"
        assert height <= SCREENS * LAPTOP["height"], f"{inc['url']} is {height} px tall (> {SCREENS} screens)"
    (bob.live.artifacts / "busy-incident-shapes.txt").write_text("\n".join(shapes) + "\n")
    bob.guard.check()


def test_the_console_never_shows_a_refuted_hypothesis_as_an_incidents_top(bob: Session) -> None:
    page = bob.page
    moments = sorted({i["diagnosed_at"] for i in bob.live.run["incidents"] if i["diagnosed_at"]})
    assert moments
    shown = 0
    for moment in moments:
        goto(page, bob.url(f"/?t={at(moment)}&w=2h"))
        rows = page.locator("#panel-incidents tbody tr")
        for n in range(rows.count()):
            top = rows.nth(n).locator("td").last
            text = top.inner_text()
            shown += 1
            assert "refuted" not in text and "unverified" not in text, text
            assert top.locator(".status-supported").count() == 1 or text.strip() in (
                "no cause found",
                "not diagnosed yet",
            ), text
    assert shown >= len(moments)
    screenshot(page, bob.live.artifacts, "busy-home")
    bob.guard.check()


def walk_to_a_gpu(bob: Session, inc: dict, to_node: str) -> list[str]:
    """Console at the incident's moment → incident → its job → a node (``to_node`` selector) → a GPU."""
    page: Page = bob.page
    goto(page, bob.url(f"/?t={at(inc['diagnosed_at'])}&w=2h"))
    trail = [url_path(page.url)]
    click_and_load(page, f"#panel-incidents a[href^='{inc['url']}']")
    trail.append(url_path(page.url))
    click_and_load(page, "#subjects a.ent-job")
    trail.append(url_path(page.url))
    page.wait_for_selector(to_node)
    click_and_load(page, to_node)
    trail.append(url_path(page.url))
    assert "/nodes/" in trail[-1], trail
    click_and_load(page, "main a.ent-gpu")
    trail.append(url_path(page.url))
    assert "/gpus/" in trail[-1], trail
    settle(page)
    return trail


def test_a_gpu_is_four_clicks_from_a_pending_and_a_running_jobs_incident(bob: Session) -> None:
    pending = incident_of(bob, "job", "llm-pretrain")  # waits: the nodes that would fit are in why-pending
    trail = walk_to_a_gpu(bob, pending, "#why-pending a[href*='/nodes/']")
    running = incident_of(bob, "job", "vision-augment")  # crash-loops on a node: "Runs on"
    trail2 = walk_to_a_gpu(bob, running, "main tr:has-text('Runs on') a.ent-node")
    for t in (trail, trail2):
        assert len(t) - 1 <= 4, t
    (bob.live.artifacts / "busy-clicks.txt").write_text(" → ".join(trail) + "\n" + " → ".join(trail2) + "\n")
    screenshot(bob.page, bob.live.artifacts, "busy-gpu")
    bob.guard.check()
