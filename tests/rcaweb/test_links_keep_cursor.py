"""Every internal link and hx-get on a page carries the cursor's t and w (docs/conventions.md §4–5)."""

from __future__ import annotations

from datetime import timedelta
from html.parser import HTMLParser
from urllib.parse import parse_qs, urlsplit

from rcaweb.cursor import parse_w
from tests.collectors.factories import PageTestCase, gpu_uuid, iso
from tests.rcaweb.urlwalk import walk

NOT_PAGES = ("/static/", "/admin/", "/accounts/", "/api/", "/metrics", "/healthz", "/readyz")
LIVE_BUTTON = "cursor-live"
W = "90m"  # links may spell it 1h30m: compared as durations


class LinkCollector(HTMLParser):
    """(tag, attribute, url) of every href / hx-get, and elements whose hx-get differs from their href."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str, str]] = []
        self.mismatched: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id") == LIVE_BUTTON:
            return  # "now" leaves t out on purpose: live mode (it keeps w, checked in its own test)
        for attr in ("href", "hx-get"):
            if a.get(attr):
                self.links.append((tag, attr, a[attr] or ""))
        if tag == "a" and a.get("hx-get") and a.get("hx-get") != a.get("href"):
            self.mismatched.append((a.get("href") or "", a.get("hx-get") or ""))


def cursorless_links(html: str, w: str = W) -> list[str]:
    """Internal page links that lose t or w (or change w); plus hx-get/href mismatches."""
    parser = LinkCollector()
    parser.feed(html)
    bad = [f"hx-get {g} != href {h}" for h, g in parser.mismatched]
    for tag, attr, url in parser.links:
        if tag in ("link", "form"):  # stylesheets; forms carry t/w as inputs, not in their action
            continue
        parts = urlsplit(url)
        if parts.scheme or parts.netloc or url.startswith(("#", "mailto:")):
            continue  # external (a change's CI/CD link) or in-page
        if not url.startswith(("/", "?")) or url.startswith(NOT_PAGES):
            continue
        q = parse_qs(parts.query)
        if "t" not in q or [parse_w(x) for x in q.get("w", [])] != [parse_w(w)]:
            bad.append(f"<{tag} {attr}={url}>")
    return bad


class LinksKeepCursorTest(PageTestCase):
    def entity_pages(self) -> list[str]:
        return [
            "/c/gpu-prod/projects/vision/",
            "/c/gpu-prod/queues/nlp/",
            "/c/gpu-prod/jobs/nlp/bert-eval/",
            "/c/gpu-prod/jobs/vision/resnet-train/",
            "/c/gpu-prod/jobs/nlp/old-sweep/",
            "/c/gpu-prod/pods/nlp/llama-ft-0/",
            "/c/gpu-prod/pods/nlp/bert-eval-0/",
            "/c/gpu-prod/nodes/h100-01/",
            "/c/gpu-prod/nodes/h100-04/",
            f"/c/gpu-prod/gpus/{gpu_uuid('h100-01', 0)}/",
            "/c/gpu-prod/jobs/",
            "/c/gpu-prod/jobs/?queue=nlp&phase=Pending",
        ]

    def test_it_keeps_t_and_w_in_every_link_of_every_entity_page(self):
        for t in (self.times["end"], self.story.t0 - timedelta(hours=1)):  # and before anything existed
            for path in self.entity_pages():
                sep = "&" if "?" in path else "?"
                r = self.client.get(f"{path}{sep}t={iso(t)}&w={W}")
                assert r.status_code == 200, path
                html = r.content.decode()
                assert html.count("<a ") > 10, path  # the page has links at all
                assert cursorless_links(html) == [], (path, t)

    def test_it_keeps_the_filters_of_the_job_list_in_the_cursor_steps(self):
        r = self.client.get(f"/c/gpu-prod/jobs/?queue=nlp&t={iso(self.times['end'])}&w={W}")
        steps = [u for _, attr, u in self._links(r.content.decode()) if "queue=nlp" in u and attr == "href"]
        assert len(steps) >= 6

    def test_it_keeps_t_and_w_on_every_other_page_of_the_url_conf(self):
        """Pages other helpers add are covered too: every pattern that answers 200 with HTML is checked."""
        overrides = {"cluster": "gpu-prod", "namespace": "nlp", "name": "h100-01", "node": "h100-01"}
        checked, failures = 0, {}
        for page in walk(overrides):
            if page.path.startswith(NOT_PAGES):
                continue
            r = self.client.get(f"{page.path}?t={iso(self.times['end'])}&w={W}")
            if r.status_code != 200 or not r.get("Content-Type", "").startswith("text/html"):
                continue
            checked += 1
            bad = cursorless_links(r.content.decode())
            if bad:
                failures[f"{page.path} ({page.name})"] = bad[:5]
        assert checked >= 3
        assert failures == {}, failures

    def test_it_goes_live_with_the_now_button_keeping_w(self):
        r = self.client.get(f"/c/gpu-prod/nodes/h100-01/?t={iso(self.times['end'])}&w={W}")
        html = r.content.decode()
        assert 'id="cursor-live" href="/c/gpu-prod/nodes/h100-01/?w=1h30m"' in html

    @staticmethod
    def _links(html: str) -> list[tuple[str, str, str]]:
        p = LinkCollector()
        p.feed(html)
        return p.links
