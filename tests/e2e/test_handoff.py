"""Flow 4 (issue #5): write a handoff note on the incident page; the handoffs page shows it; the export downloads."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from tests.e2e.browser import TIMEOUT_MS, Session, bar_t, click_and_load, goto, settle, url_params, url_path

pytestmark = pytest.mark.e2e


def test_it_writes_a_handoff_note_that_the_handoffs_page_and_its_export_carry(alice: Session) -> None:
    page = alice.page
    incident = alice.live.incident
    goto(page, alice.url(incident["url"]))
    page.evaluate("window.__marker = 'kept'")
    form = page.locator("#handoff form.handoff-form")
    assert form.is_visible(), "a responder sees no handoff form on the incident page"
    summary = f"e2e handoff {secrets.token_hex(4)}: llama-ft OOMs at batch 32; asked the team to halve it"
    next_steps = "Check the resubmitted job at 09:00"
    form.locator("textarea[name=summary]").fill(summary)
    form.locator("textarea[name=next_steps]").fill(next_steps)
    form.locator("button[type=submit]").first.click()
    # htmx swaps the panel in place: the note appears, and the page was not reloaded.
    page.locator("#handoff dl.handoff-fields dd", has_text=summary).first.wait_for(timeout=TIMEOUT_MS)
    settle(page)
    assert page.evaluate("window.__marker") == "kept"
    assert page.locator("#handoff dd", has_text=next_steps).is_visible()

    t = bar_t(page)
    click_and_load(page, "header nav a:text-is('Handoffs')")
    assert url_path(page.url) == "/handoffs/"
    assert url_params(page.url).get("t") == t, "the nav link to the handoffs page lost the cursor"
    item = page.locator("article.handoff-item", has=page.locator(f"a[href^='{incident['url']}']"))
    assert item.get_by_text(summary).is_visible(), "the handoffs page does not show the note just written"

    with page.expect_download(timeout=TIMEOUT_MS) as info:
        page.click("main a:has-text('Markdown export')")
    download = info.value
    assert download.suggested_filename.endswith(".md"), download.suggested_filename
    path = Path(download.path())
    text = path.read_text(encoding="utf-8")
    assert summary in text and next_steps in text, f"the Markdown export lacks the note:\n{text[:1500]}"
    assert f"#{incident['id']}" in text
    (alice.live.artifacts / download.suggested_filename).write_text(text, encoding="utf-8")
