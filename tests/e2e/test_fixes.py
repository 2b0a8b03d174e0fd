"""Fixes of the first browser pass, checked in the browser: time cells that never wrap, the incident's "now",
container changes that name the field that changed. Screenshots: artifacts/e2e/fixes-*.png."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.e2e.browser import Session, goto, parse_z, url_params

pytestmark = pytest.mark.e2e

T = "2026-11-29T00:14:00Z"
Q = f"?t={T}&w=2h"

# How many line boxes each matching cell's text takes (1 = it did not wrap).
LINES = """(selector) => [...document.querySelectorAll(selector)].map((el) => {
  const range = document.createRange();
  range.selectNodeContents(el);
  const tops = new Set([...range.getClientRects()].filter((r) => r.width > 0).map((r) => Math.round(r.top)));
  return [el.textContent.trim(), tops.size];
})"""


def test_incident_times_stay_on_one_line_even_on_a_narrow_screen(alice: Session) -> None:
    page = alice.page
    page.set_viewport_size({"width": 1024, "height": 800})
    goto(page, alice.url(alice.live.incident["url"] + Q))
    cells = page.evaluate(LINES, "#timeline tbody td:first-child, #evidence tbody td:first-child")
    assert len(cells) >= 4, "no time cells in the timeline/evidence"
    wrapped = [text for text, lines in cells if lines != 1]
    assert not wrapped, f"time cells broken over lines at 1024 px: {wrapped[:5]}"
    page.locator("#timeline").screenshot(path=str(alice.live.artifacts / "fixes-timeline-1024.png"))


def test_now_on_the_incident_page_goes_to_the_present_not_the_onset(alice: Session) -> None:
    page = alice.page
    goto(page, alice.url(alice.live.incident["url"]))  # no t: the page opens at the onset
    onset = page.locator("#cursor-bar").get_attribute("data-t")
    before = datetime.now(UTC).replace(microsecond=0)
    with page.expect_navigation(wait_until="load"):
        page.evaluate("() => { location.href = document.querySelector('#cursor-live').href; }")
    now_t = url_params(page.url).get("t")
    assert now_t and now_t != onset, f"now went to {now_t}, the onset is {onset}"
    assert before - timedelta(seconds=5) <= parse_z(now_t) <= datetime.now(UTC) + timedelta(seconds=5)
    assert page.locator("#cursor-bar").get_attribute("data-t") == now_t


def test_changes_page_names_the_container_field_that_changed(alice: Session) -> None:
    page = alice.page
    # pod churn is summed by default (the signal first); a kind filter lists its changes one by one
    goto(page, alice.url("/changes/" + Q + "&kind=pod"))
    rows = page.locator("#change-list tr", has_text="containers")
    assert rows.count() >= 1, "the scenario recorded no container change"
    diff = rows.first.locator("td.diff").inner_text()
    assert "[main]." in diff and "[{'name'" not in diff, diff
    old, new = (
        rows.first.locator("td.diff .old").first.inner_text(),
        rows.first.locator("td.diff .new").first.inner_text(),
    )
    assert old != new, diff
    page.screenshot(path=str(alice.live.artifacts / "fixes-changes.png"), full_page=True)
    page.screenshot(path=str(alice.live.artifacts / "fixes-changes-top.png"))
    goto(page, alice.url(alice.live.incident["url"] + Q))
    page.screenshot(path=str(alice.live.artifacts / "fixes-incident-top.png"))
    page.locator("#timeline").screenshot(path=str(alice.live.artifacts / "fixes-incident-timeline.png"))
