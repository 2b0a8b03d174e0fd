"""Shares in the browser (issue 45 item 1), on a sharing scenario run through the real pipeline, at 1280×900.

From the crash-loop incident of a 0.5-GPU notebook: its job page reads its share of the L40S it was given
(not "1 pod × ? = 0"), and its pod's GPU links the node; the node page's "Used by" lists the pods sharing
each GPU with their fraction and memory, and KAI's reservation pod under them, named as such. Screenshots:
artifacts/e2e/share-job*.png and share-node*.png (and /tmp/shots/ when that folder exists).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser

from tests.e2e import server as srv
from tests.e2e.browser import LAPTOP, Session, click_and_load, goto, screenshot, url_params, url_path
from tests.e2e.conftest import _login_state, _session

pytestmark = pytest.mark.e2e

SHARING = srv.REPO / "simulator" / "scenarios" / "shared-mig-department-crashloop.yaml"
JOB = "vision/notebook-ana"  # 0.5 of an L40S, crash-looping, on a GPU KAI shares
SHOTS = Path("/tmp/shots")


@pytest.fixture(scope="module")
def sharing(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[srv.Server]:
    server = srv.start(tmp_path_factory.mktemp("sharing"), artifacts, SHARING, JOB, name="sharing")
    try:
        yield server
    finally:
        srv.stop(server.proc)


@pytest.fixture
def carol(
    browser: Browser, sharing: srv.Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Session]:
    """A responder on the sharing scenario's server, on a laptop's screen."""
    yield from _session(browser, sharing, _login_state(browser, sharing, tmp_path_factory), LAPTOP)


def _shot(session: Session, name: str) -> None:
    path = screenshot(session.page, session.live.artifacts, name)
    if SHOTS.is_dir():
        for p in (path, path.with_name(f"{name}-top.png")):
            shutil.copy(p, SHOTS / p.name)


def test_a_fractional_job_and_its_shared_node_show_the_share_and_who_shares_it(carol: Session) -> None:
    page = carol.page
    goto(page, carol.url(carol.live.incident["url"]))
    t = url_params(page.url).get("t") or page.locator("#cursor-bar").get_attribute("data-t")
    click_and_load(page, f'main a[href*="/jobs/{JOB}/"]')
    assert url_path(page.url).endswith(f"/jobs/{JOB}/") and url_params(page.url).get("t") == t

    request = page.locator("#job-state tr:has(th:text('GPUs requested')) td").inner_text()
    assert "1 pod × 0.5 of an L40S" in request and "GiB" in request and "= 0.5 GPU" in request, request
    assert "?" not in request
    pod_gpus = page.locator("#job-pods tbody td:nth-child(4)").first.inner_text()
    assert "0.5 of an L40S" in pod_gpus and "held for KAI by its reservation pod" in pod_gpus, pod_gpus
    _shot(carol, "share-job")

    click_and_load(page, "#job-pods tbody td:nth-child(3) a")  # the pod's node
    assert "/nodes/l40s-" in url_path(page.url) and url_params(page.url).get("t") == t
    cell = page.locator("#node-gpus tbody td:has(a[href*='/pods/vision/notebook-ana-'])")
    assert cell.count() == 1, "no GPU of the node lists the notebook among its users"
    text = cell.inner_text()
    assert "0.5 of an L40S" in text and "GiB" in text, text
    # KAI's reservation pod is named as such, under the pods sharing the GPU, never as its user
    note = text.index("device held for KAI by its reservation pod")
    assert text.index("notebook-ana") < note and "gpu-reservation-" in text[note:], text
    holders = cell.locator(".holder a").all_inner_texts()
    assert holders and not any(h.startswith("runai-reservation/") for h in holders), holders
    assert "shared by" in page.locator("#node-state").inner_text()
    _shot(carol, "share-node")
    carol.guard.check()
