"""Flows 2 and 3 (issue #5): move the time cursor with the bar, the keyboard and a chart click.

The world (tests/e2e/scenario.yaml) raises the nlp quota from 8 to 12 GPUs at 00:20, so the nlp project
page shows a different state before and after: a swap that did not really fetch the state at the new t
cannot pass. When the raise was *recorded* depends on the sweep schedule, so the tests read it from the page
(its "next change" link) and place their times around it. ``window.__marker`` is set once; it survives only
if no full page load happened.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page

from tests.e2e.browser import TIMEOUT_MS, Session, as_of, bar_t, goto, parse_z, settle, url_params

pytestmark = pytest.mark.e2e

START = "2026-11-29T00:05:00Z"  # the project exists, with its first quota
PROJECT = "/c/gpu-prod/projects/nlp/"
NEXT_CHANGE = re.compile(r'id="cursor-next-change" href="[^"]*[?&]t=([0-9-]+T[0-9%A]+Z)')

WAIT_CURSOR = """(t) => new URL(location.href).searchParams.get("t") === t
  && document.querySelector("#cursor-bar") && document.querySelector("#cursor-bar").dataset.t === t"""


def shifted(t: str, **delta: int) -> str:
    return (parse_z(t) + timedelta(**delta)).strftime("%Y-%m-%dT%H:%M:%SZ")


def wait_cursor(page: Page, t: str) -> None:
    """Wait for the URL and the swapped cursor bar to say ``t``, then for htmx to settle."""
    page.wait_for_function(WAIT_CURSOR, arg=t, timeout=TIMEOUT_MS, polling=50)
    settle(page)


def quota_raised_at(session: Session) -> str:
    """When the quota raise was recorded: the project page's "next change" after START (fetched, not rendered)."""
    html = session.context.request.get(session.url(f"{PROJECT}?t={START}&w=2h")).text()
    found = NEXT_CHANGE.search(html)
    assert found, f"the nlp project page at {START} offers no next change"
    t = found[1].replace("%3A", ":")
    assert parse_z(START) < parse_z(t) <= parse_z("2026-11-29T00:30:00Z"), f"quota raise recorded at {t}"
    return t


def quota(page: Page) -> str:
    return page.locator("#project-policy tr", has_text="Quota (deserved)").locator("td").inner_text().strip()


def assert_at(page: Page, t: str, expected_quota: str) -> None:
    assert url_params(page.url).get("t") == t
    assert url_params(page.url).get("w") == "2h", f"{page.url} lost w"
    assert bar_t(page) == t
    assert as_of(page) == t, f"the page body still shows {as_of(page)}, the cursor says {t}"
    assert quota(page) == expected_quota, (
        f"at {t} the nlp quota should read {expected_quota!r}, not {quota(page)!r}"
    )
    assert page.evaluate("window.__marker") == "kept", f"a full page load happened on the way to {page.url}"
    # Every chart is a live Plotly graph (clickable) drawing the cursor at t, also after Back/Forward.
    lines = page.evaluate(CURSOR_LINES)
    assert lines and all(x == [t.replace("T", " ").rstrip("Z")] for x in lines), (
        f"chart cursor lines at {t}: {lines}"
    )


CURSOR_LINES = """() => [...document.querySelectorAll(".plotly-chart")].map((el) =>
  el.data && el._fullLayout ? el.layout.shapes.filter((s) => s.name === "cursor").map((s) => s.x0) : "not a live chart")"""


def test_it_moves_the_cursor_with_buttons_and_keys_without_reloading(alice: Session) -> None:
    page = alice.page
    raised = quota_raised_at(alice)
    t0 = shifted(raised, minutes=-5)  # before the raise; t0 + 10m is after it
    goto(page, alice.url(f"{PROJECT}?t={t0}&w=2h"))
    assert quota(page) == "8 GPUs"
    page.evaluate("window.__marker = 'kept'")

    page.click("#cursor-bar a.step[data-step='+10m']")
    t1 = shifted(t0, minutes=10)
    wait_cursor(page, t1)
    assert_at(page, t1, "12 GPUs")

    page.keyboard.press("ArrowRight")
    t2 = shifted(t1, minutes=1)
    wait_cursor(page, t2)
    assert_at(page, t2, "12 GPUs")

    page.keyboard.press("ArrowLeft")
    wait_cursor(page, t1)
    assert_at(page, t1, "12 GPUs")

    page.keyboard.press("Shift+ArrowLeft")
    wait_cursor(page, t0)
    assert_at(page, t0, "8 GPUs")

    page.click("#cursor-bar a.step[data-step='-1m']")
    t3 = shifted(t0, minutes=-1)
    wait_cursor(page, t3)
    assert_at(page, t3, "8 GPUs")

    # History: [t0, t1, t2, t1, t0, t3]; back and forward restore each state, still without a full load.
    for expected_t, expected_quota, move in [
        (t0, "8 GPUs", page.go_back),
        (t1, "12 GPUs", page.go_back),
        (t2, "12 GPUs", page.go_back),
        (t1, "12 GPUs", page.go_forward),
    ]:
        move(wait_until="commit")
        wait_cursor(page, expected_t)
        assert_at(page, expected_t, expected_quota)


def test_it_steps_to_the_next_change_with_the_bracket_key(alice: Session) -> None:
    page = alice.page
    raised = quota_raised_at(alice)
    goto(page, alice.url(f"{PROJECT}?t={START}&w=2h"))
    assert quota(page) == "8 GPUs"
    page.evaluate("window.__marker = 'kept'")
    page.keyboard.press("]")
    wait_cursor(page, raised)
    assert_at(page, raised, "12 GPUs")
    before = url_params(page.locator("#cursor-prev-change").get_attribute("href") or "").get("t", "")
    assert before and parse_z(before) < parse_z(raised), f"no previous change before the raise at {raised}"
    page.keyboard.press("[")
    wait_cursor(page, before)
    assert_at(page, before, "8 GPUs")


def chart_points(page: Page, selector: str) -> list[str]:
    """The x of every sample of the chart's own series (not the change/alert markers on the hidden axis)."""
    return page.locator(selector).first.evaluate(
        "(el) => el.data.filter((tr) => !tr.yaxis || tr.yaxis === 'y').flatMap((tr) => (tr.x || []).map(String))"
    )


CLICK_AT = """([sel, x]) => {
  const el = document.querySelector(sel);
  const fl = el._fullLayout, xa = fl.xaxis, ya = fl.yaxis;
  window.__clicked = null;
  el.on("plotly_click", (ev) => { window.__clicked = String(ev.points[0].x); });
  const trace = el.data.find((tr) => (tr.x || []).map(String).includes(x) && (!tr.yaxis || tr.yaxis === "y"));
  const i = trace.x.map(String).indexOf(x);
  const box = el.querySelector(".nsewdrag").getBoundingClientRect();
  return {px: box.left + xa.d2p(x), py: box.top + ya.d2p(trace.y[i])};
}"""


def test_it_moves_the_cursor_to_a_clicked_chart_point(alice: Session) -> None:
    page = alice.page
    raised = quota_raised_at(alice)
    t0 = shifted(raised, minutes=-5)
    goto(page, alice.url(f"{PROJECT}?t={t0}&w=2h"))
    page.evaluate("window.__marker = 'kept'")
    chart = ".plotly-chart[data-rendered][aria-label*='allocated' i]"
    points = chart_points(page, chart)
    assert points, "the allocation chart has no points"
    cursor_line = page.locator(chart).evaluate(
        "(el) => el.layout.shapes.filter((s) => s.name === 'cursor').map((s) => s.x0)"
    )
    assert cursor_line == [t0.replace("T", " ").rstrip("Z")], (
        f"the chart's cursor line is at {cursor_line}, not {t0}"
    )
    target = max(points)  # the last sample: after the quota raise
    where = page.evaluate(CLICK_AT, [chart, target])
    page.mouse.move(where["px"], where["py"])
    page.mouse.click(where["px"], where["py"])
    page.wait_for_function("() => window.__clicked !== null", timeout=TIMEOUT_MS)
    clicked = page.evaluate("window.__clicked")
    m = re.match(r"^(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2})(?::(\d{2}))?", clicked)
    assert m, f"plotly reported the click at {clicked!r}"
    expected = f"{m[1]}T{m[2]}:{m[3]}:{m[4] or '00'}Z"
    assert parse_z(expected) > parse_z(raised), f"the click landed at {clicked}, not at {target}"
    wait_cursor(page, expected)
    assert_at(page, expected, "12 GPUs")
    redrawn = page.locator(chart).evaluate(
        "(el) => el.layout.shapes.filter((s) => s.name === 'cursor').map((s) => s.x0)"
    )
    assert redrawn == [expected.replace("T", " ").rstrip("Z")], (
        "the redrawn chart does not draw the cursor at t"
    )
