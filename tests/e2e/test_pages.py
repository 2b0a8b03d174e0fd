"""Flows 5 and 6 (issue #5): every main page, at the incident's time, loads clean and is photographed.

"Clean" is the guard's rule (no console error, no failed request, no other host) plus: the cursor bar
shows the URL's t, the lazy panels and charts finished, and every link to another rcaweb page keeps t and w
(except the cursor bar's "now", which goes live on purpose).
Screenshots land in artifacts/e2e/<name>.png for a human to look at.
"""

from __future__ import annotations

import re
from html import unescape

import pytest

from tests.e2e.browser import Session, bar_t, goto, screenshot, url_params

pytestmark = pytest.mark.e2e

T = "2026-11-29T00:14:00Z"
Q = f"?t={T}&w=2h"

JOB = "/c/gpu-prod/jobs/llm/llama-ft/" + Q
# Links followed by fetching the page's HTML (not rendering it: one browser render per test keeps the suite fast).
RUNS_ON = r"Runs on</th>\s*<td>\s*<a class=\"ent ent-node\" href=\"([^\"]+)\""
FIRST_GPU = r"<a class=\"ent ent-gpu\" href=\"([^\"]+)\""
# (name, where to start, links to follow from there: the node and GPU are wherever the simulator put the job)
PAGES: list[tuple[str, str, list[str]]] = [
    ("home", "/" + Q, []),
    ("incident", "{incident}" + Q, []),
    ("job", JOB, []),
    ("queue", "/c/gpu-prod/queues/llm/" + Q, []),
    ("project", "/c/gpu-prod/projects/nlp/" + Q, []),
    ("node", JOB, [RUNS_ON]),
    ("gpu", JOB, [RUNS_ON, FIRST_GPU]),
    ("fleet", "/fleet/" + Q, []),
    ("slo", "/slo/" + Q, []),
    ("changes", "/changes/" + Q, []),
    ("handoffs", "/handoffs/" + Q, []),
]

# Panels also photographed on their own (the full page of an incident is too tall to read as one image).
PANELS = {"incident": ["#hypotheses", "#timeline", "#handoff"]}

LINKS_WITHOUT_CURSOR = """() => [...document.querySelectorAll("a[href]:not(#cursor-live)")]
  .map((a) => new URL(a.getAttribute("href"), location.href))
  .filter((u) => u.origin === location.origin && !u.hash && !/^\\/(static|accounts|admin)\\//.test(u.pathname)
                 && !/\\.md$|^\\/api\\//.test(u.pathname))
  .filter((u) => !u.searchParams.get("t") || !u.searchParams.get("w"))
  .map((u) => u.pathname + u.search)"""


@pytest.mark.parametrize("name,path,follow", PAGES, ids=[p[0] for p in PAGES])
def test_it_renders_each_main_page_clean_at_the_incident_time(
    alice_tour: Session, name: str, path: str, follow: list[str]
) -> None:
    page = alice_tour.page
    url = path.format(incident=alice_tour.live.incident["url"])
    for pattern in follow:
        html = alice_tour.context.request.get(alice_tour.url(url)).text()
        found = re.search(pattern, html)
        assert found, f"{url} has no link matching {pattern}"
        url = unescape(found[1])
    goto(page, alice_tour.url(url))
    assert f"/{name}s/" in page.url or not follow
    assert url_params(page.url).get("t") == T
    assert bar_t(page) == T, f"{name}: the cursor bar shows another time than the URL"
    main = page.locator("main").inner_text()
    assert "Server Error" not in main and "Traceback" not in main
    missing = page.evaluate(LINKS_WITHOUT_CURSOR)
    assert not missing, f"{name}: links that drop the cursor: {missing[:10]}"
    screenshot(page, alice_tour.live.artifacts, name)
    for selector in PANELS.get(name, []):
        panel = page.locator(selector).first
        panel.screenshot(path=str(alice_tour.live.artifacts / f"{name}-{selector.split()[0].strip('#')}.png"))
    alice_tour.guard.check()
