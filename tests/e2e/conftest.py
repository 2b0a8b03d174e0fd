"""Fixtures of the browser tests: real servers and Debian's chromium for this folder's tests, a guard on every context.

Every test in this folder is marked ``e2e``. Chromium is never downloaded: the tests drive
``/usr/bin/chromium``. Without it they skip and say why (``make test`` prints skip reasons), so the suite
passes on a machine with only Python and pip. ``.ci/run`` installs chromium and sets
``RCAWEB_REQUIRE_BROWSER=1``: there a browser test that skips, for any reason, is a failure.

Run: ``.venv/bin/pytest tests/e2e -q`` (or ``-m e2e``). Artifacts land in ``artifacts/e2e/``: a full-page and a
first-screen screenshot per main page, ``server.log``/``access.log`` of gunicorn (with request times),
``clicks.txt`` (clicks from the console to a GPU's telemetry) and the downloaded handoff export.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from tests.e2e import server as srv
from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS, LAPTOP, TIMEOUT_MS, VIEWPORT, Guard, Session

logger = logging.getLogger(__name__)

ARTIFACTS = srv.REPO / "artifacts" / "e2e"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Screenshots, server logs, the downloaded export. Overwritten, never emptied: runs may overlap."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="package")
def live(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[srv.Server]:
    """gunicorn serving the e2e scenario's world (see tests/e2e/server.py)."""
    started = time.monotonic()
    server = srv.start(tmp_path_factory.mktemp("e2e"), artifacts)
    server.timings["setup_s"] = round(time.monotonic() - started, 2)
    (artifacts / "setup-timings.txt").write_text("".join(f"{k} {v}\n" for k, v in server.timings.items()))
    try:
        yield server
    finally:
        srv.stop(server.proc)


REQUIRE_BROWSER = os.environ.get("RCAWEB_REQUIRE_BROWSER", "") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With RCAWEB_REQUIRE_BROWSER=1 (CI) a skipped browser test is a failed one: a skip there hides a
    missing install, and a green run would then have tested no browser at all."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_BROWSER and report.skipped and item.get_closest_marker("e2e") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but RCAWEB_REQUIRE_BROWSER=1 makes a skip a failure: {reason}"


# The browser, the servers and the login states last as long as this folder's tests, not the session:
# Playwright's sync API runs an asyncio loop in the test's thread while it is open, and Django refuses
# database work under a running loop (SynchronousOnlyOperation). Under xdist the e2e group runs on one
# worker among the other tests (tests/conftest.py): every database test after it there would fail.
@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    if not Path(CHROMIUM).is_file():
        pytest.skip(
            f"{CHROMIUM} is missing: the browser tests drive Debian's chromium (apt-get install chromium); "
            "they never download a browser"
        )
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    b = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
    try:
        yield b
    finally:
        b.close()


def _login_state(browser: Browser, live: srv.Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A session cookie obtained through the login form once (test_navigation logs in by hand too)."""
    context = browser.new_context(viewport=VIEWPORT)
    guard = Guard(live.netloc)
    guard.attach(context)
    page = context.new_page()
    page.goto(live.url + "/accounts/login/")
    page.fill("input[name=username]", srv.USERNAME)
    page.fill("input[name=password]", srv.PASSWORD)
    with page.expect_navigation(wait_until="load"):
        page.click("button[type=submit]")
    assert page.url == live.url + "/", f"login did not land on the console: {page.url}"
    path = tmp_path_factory.mktemp("auth") / "state.json"  # a session cookie: not an artifact to keep
    context.storage_state(path=str(path))
    context.close()
    guard.check()
    return str(path)


@pytest.fixture(scope="package")
def auth_state(browser: Browser, live: srv.Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _login_state(browser, live, tmp_path_factory)


@pytest.fixture(scope="package")
def busy(artifacts: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[srv.Server]:
    """gunicorn serving a busy bundled scenario (srv.BUSY: overlapping faults on 18 nodes)."""
    started = time.monotonic()
    server = srv.start(
        tmp_path_factory.mktemp("busy"), artifacts, srv.BUSY, srv.BUSY_JOB, name="busy", scenario_timeout=900
    )
    server.timings["setup_s"] = round(time.monotonic() - started, 2)
    (artifacts / "busy-setup-timings.txt").write_text("".join(f"{k} {v}\n" for k, v in server.timings.items()))
    try:
        yield server
    finally:
        srv.stop(server.proc)


@pytest.fixture(scope="package")
def busy_auth(browser: Browser, busy: srv.Server, tmp_path_factory: pytest.TempPathFactory) -> str:
    return _login_state(browser, busy, tmp_path_factory)


@pytest.fixture
def bob(browser: Browser, busy: srv.Server, busy_auth: str) -> Iterator[Session]:
    """A responder logged in to the busy scenario's server, on a 1280×900 screen (a laptop's)."""
    yield from _session(browser, busy, busy_auth, LAPTOP)


def _session(
    browser: Browser, live: srv.Server, storage_state: str | None, viewport: dict[str, int] = VIEWPORT
) -> Iterator[Session]:
    context = browser.new_context(viewport=viewport, storage_state=storage_state, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    guard = Guard(live.netloc)
    guard.attach(context)
    session = Session(context, guard, live)
    try:
        yield session
    finally:
        context.close()
    guard.check()


@pytest.fixture
def anon(browser: Browser, live: srv.Server) -> Iterator[Session]:
    """A fresh browser with no cookie (for the login flow)."""
    yield from _session(browser, live, None)


@pytest.fixture
def alice(browser: Browser, live: srv.Server, auth_state: str) -> Iterator[Session]:
    """Alice, a responder, already logged in."""
    yield from _session(browser, live, auth_state)


@pytest.fixture(scope="module")
def alice_tour(browser: Browser, live: srv.Server, auth_state: str) -> Iterator[Session]:
    """Alice in one browser for a whole module (a tour of many pages shares the HTTP cache, as a person's does).

    Tests using it call ``guard.check()`` themselves, so a problem is pinned on the page that caused it.
    """
    yield from _session(browser, live, auth_state)
