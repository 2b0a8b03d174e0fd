"""Grouped handoffs in the browser (issue 45 item 4), at 1280×900: incidents with one cause are one problem.

The world (tests/e2e/scenario-quota-problem.yaml) runs through the real pipeline: a quota cut holds three
vision jobs, each raising its own GPUJobPendingTooLong incident, all diagnosed with the same cause. A note
written on one of the later incidents shows under the problem's lead on /handoffs/; the Markdown export groups
the same way. Screenshots: artifacts/e2e/handoff-problems*.png (and /tmp/shots/ when that folder exists).
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.e2e import server as srv
from tests.e2e.browser import (
    LAPTOP,
    TIMEOUT_MS,
    Session,
    click_and_load,
    goto,
    screenshot,
    settle,
    url_params,
    url_path,
)
from tests.e2e.conftest import _login_state, _session

pytestmark = pytest.mark.e2e

QUOTA = Path(__file__).resolve().parent / "scenario-quota-problem.yaml"
JOB = "vision/vit-a"
SHOTS = Path("/tmp/shots")


@pytest.fixture(scope="module")
def quota(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[srv.Server]:
    server = srv.start(tmp_path_factory.mktemp("quota"), artifacts, QUOTA, JOB, name="quota")
    try:
        yield server
    finally:
        srv.stop(server.proc)


@pytest.fixture
def dana(browser: Browser, quota: srv.Server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A responder on the quota scenario's server, on a laptop's screen."""
    yield from _session(browser, quota, _login_state(browser, quota, tmp_path_factory), LAPTOP)


def _shot(session: Session, name: str) -> None:
    path = screenshot(session.page, session.live.artifacts, name)
    if SHOTS.is_dir():
        for p in (path, path.with_name(f"{name}-top.png")):
            shutil.copy(p, SHOTS / p.name)


def test_the_handoffs_page_shows_the_jobs_held_by_one_quota_cut_as_one_problem(dana: Session) -> None:
    page = dana.page
    incidents = dana.live.run["incidents"]
    waiting = [i for i in incidents if any(s["name"].startswith("vit-") for s in i["subjects"])]
    assert len(waiting) == 3, [i["title"] for i in incidents]
    t = dana.live.run["end"]

    # a note on the last of them: the handoffs page must show it under the problem's lead
    last = max(waiting, key=lambda i: i["id"])
    goto(page, dana.url(f"{last['url']}?t={t}&w=2h"))
    summary = f"e2e {secrets.token_hex(3)}: vit jobs wait on the vision quota; asked platform-admin"
    form = page.locator("#handoff form.handoff-form")
    form.locator("textarea[name=summary]").fill(summary)
    form.locator("button[type=submit]").first.click()
    page.locator("#handoff dl.handoff-fields dd", has_text=summary).first.wait_for(timeout=TIMEOUT_MS)
    settle(page)

    click_and_load(page, "header nav a:text-is('Handoffs')")
    assert url_path(page.url) == "/handoffs/" and url_params(page.url).get("t") == t
    heading = page.locator("main h1").inner_text()
    assert f"{len(incidents)} open incident" in heading and "problem" in heading, heading
    cards = page.locator("article.handoff-problem")
    assert cards.count() == 1, f"{cards.count()} grouped problems on {page.url}"
    card = cards.first
    head = card.locator(".problem-head").inner_text()
    assert "3 incidents" in head and "project_quota_exhausted" in head and "project vision" in head, head
    lead = card.locator("h2 a").first.get_attribute("href") or ""
    members = card.locator(".problem-members li[id^=member-] > a").evaluate_all("els => els.map(e => e.href)")
    linked = {url_path(lead), *(url_path(m) for m in members)}
    assert linked == {i["url"] for i in waiting}, (linked, [i["url"] for i in waiting])
    assert "Leading hypothesis" in card.locator(".handoff-lead").inner_text()
    assert "quota" in card.locator(".handoff-lead li").nth(1).inner_text().lower()  # its first action
    assert page.locator("article.handoff-item").count() == len(incidents) - 2  # one card per problem
    if last["url"] != url_path(lead):  # a member: its note is folded under it, its summary shown
        note = card.locator(f"#member-{last['id']} details.member-note")
        assert summary[:40] in note.locator("summary").inner_text()
    else:
        assert card.locator("dl.handoff-fields", has_text=summary).count() == 1
    _shot(dana, "handoff-problems")

    with page.expect_download(timeout=TIMEOUT_MS) as info:
        page.click("main a:has-text('Markdown export')")
    text = Path(info.value.path()).read_text(encoding="utf-8")
    assert "## Problem: Project quota exhausted on project vision (3 incidents" in text, text[:1500]
    assert summary in text and "&lt;" not in text and "&gt;" not in text
    (dana.live.artifacts / "handoff-problems.md").write_text(text, encoding="utf-8")

    # a member's link opens its incident page
    click_and_load(page, "article.handoff-problem .problem-members li[id^=member-] > a")
    assert url_path(page.url) in {i["url"] for i in waiting}
    dana.guard.check()
