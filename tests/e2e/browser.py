"""Browser helpers for the e2e tests: a guard that records what went wrong on every page, settle waits, cursor reads.

The guard is the "no console errors, no failed requests, no external host" rule of issue #5: it listens to
every page of a context from its first request, and the fixture that owns it asserts at the end of the test.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import BrowserContext, Page, Request, Response

logger = logging.getLogger(__name__)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1440, "height": 900}
LAPTOP = {"width": 1280, "height": 900}  # the busy-cluster page-shape tests
TIMEOUT_MS = 15_000


@dataclass
class Guard:
    """Everything a page did wrong: console errors, uncaught exceptions, 4xx/5xx, failed requests, other hosts."""

    netloc: str
    problems: list[str] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    visited: list[str] = field(default_factory=list)
    requests: int = 0

    def attach(self, context: BrowserContext) -> None:
        context.on("page", self.watch)
        context.on("request", self._request)
        context.on("requestfailed", self._failed)
        context.on("response", self._response)

    def watch(self, page: Page) -> None:
        page.on("console", lambda msg: self._console(page, msg.type, msg.text, msg.location))
        page.on("pageerror", lambda exc: self.problems.append(f"uncaught exception on {page.url}: {exc}"))
        page.on("framenavigated", lambda frame: frame == page.main_frame and self.visited.append(frame.url))

    def _console(self, page: Page, kind: str, text: str, location: dict[str, Any]) -> None:
        if kind == "error":
            self.problems.append(f"console error on {page.url}: {text} ({location.get('url', '')})")

    def _request(self, request: Request) -> None:
        self.requests += 1
        parts = urlsplit(request.url)
        if parts.scheme in ("http", "https", "ws", "wss"):
            self.hosts.add(parts.netloc)

    def _failed(self, request: Request) -> None:
        self.problems.append(f"request failed: {request.method} {request.url}: {request.failure}")

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self.problems.append(f"HTTP {response.status} for {response.request.method} {response.url}")

    def external_hosts(self) -> set[str]:
        return {h for h in self.hosts if h != self.netloc}

    def check(self) -> None:
        """Fail with every problem seen (call at the end of a test; the fixture calls it too)."""
        problems = list(self.problems)
        if self.external_hosts():
            problems.append(
                f"requests to hosts other than the server {self.netloc}: {sorted(self.external_hosts())}"
            )
        self.problems.clear()
        assert not problems, "browser problems:\n  " + "\n  ".join(problems)


class Session:
    """One browser context for one test, with its guard; ``page`` is its first tab."""

    def __init__(self, context: BrowserContext, guard: Guard, live: Any) -> None:
        self.context = context
        self.guard = guard
        self.live = live
        self.page = context.new_page()

    def url(self, path: str) -> str:
        return self.live.url + path


#
# Waiting without sleeping
#
SETTLED = """() => document.readyState === "complete"
  && !!window.htmx
  && !document.querySelector(".htmx-request, .htmx-swapping, .htmx-settling, .chart-loading")
  && [...document.querySelectorAll(".plotly-chart[data-figure]")].every(
       (el) => el.hasAttribute("data-rendered") && el.querySelector(".main-svg"))
  && !document.querySelector("#handoff a[hx-trigger=load]")"""


def settle(page: Page) -> None:
    """Wait until htmx has nothing in flight, every lazy panel loaded and every chart drawn."""
    page.wait_for_function(SETTLED, timeout=TIMEOUT_MS, polling=50)


def goto(page: Page, url: str) -> None:
    page.goto(url, wait_until="load")
    settle(page)


def click_and_load(page: Page, selector: str) -> None:
    """Click a link that leaves the page (a full load) and wait for the new page to settle."""
    link = page.locator(selector).first
    href = link.get_attribute("href")
    assert href, f"{selector} on {page.url} has no href"
    with page.expect_navigation(wait_until="load", timeout=TIMEOUT_MS):
        link.click()
    settle(page)


#
# The cursor
#
def url_params(url: str) -> dict[str, str]:
    return {k: v[-1] for k, v in parse_qs(urlsplit(url).query).items()}


def url_path(url: str) -> str:
    return urlsplit(url).path


def bar_t(page: Page) -> str:
    """The time the cursor bar shows (its data-t, its <time datetime> and its t input agree, else fail)."""
    bar = page.locator("#cursor-bar")
    data_t = bar.get_attribute("data-t")
    shown = bar.locator("time.cursor-time").get_attribute("datetime")
    field_value = bar.locator("input[name=t]").input_value()
    assert data_t == shown == field_value, (
        f"cursor bar disagrees with itself on {page.url}: {data_t}, {shown}, {field_value}"
    )
    assert data_t
    return data_t


def bar_window(page: Page) -> str:
    return page.locator("#cursor-bar input[name=w]").input_value()


def as_of(page: Page) -> str:
    """The datetime of the page heading's "as of <time>" (entity pages and consoles print the state's time)."""
    return page.locator("main h1 time[datetime]").first.get_attribute("datetime") or ""


def parse_z(value: str) -> datetime:
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


def screenshot(page: Page, artifacts: Path, name: str) -> Path:
    """``name.png`` (the whole page) and ``name-top.png`` (what the first screen shows, readable at full size)."""
    path = artifacts / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.screenshot(path=str(artifacts / f"{name}-top.png"))
    return path
