"""The fast link helpers of web.templatetags.rcaweb build exactly what Cursor.link / format_html would."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.urls import NoReverseMatch
from django.utils.html import format_html

from collectors.models import Cluster, Entity
from collectors.queries import Ref
from rcaweb.cursor import Cursor
from web.templatetags.rcaweb import _absolute_url, _link, at_time_link, entity_link_html, moved_query

T = datetime(2026, 11, 29, 3, 12, 7, tzinfo=UTC)
CURSORS = [
    Cursor(),  # live, default window: no query at all
    Cursor(window=timedelta(minutes=30), window_given=True),  # live with w
    Cursor(at=T),
    Cursor(at=T, window=timedelta(hours=1, minutes=30), window_given=True),
]
URLS = [
    "/c/gpu-prod/nodes/h100-01/",
    "/c/gpu-prod/jobs/?queue=nlp&phase=Pending",
    "/c/gpu-prod/jobs/?t=2026-01-01T00:00:00Z&queue=nlp",
    "/incidents/4/#handoff",
    "/c/gpu-prod/nodes/odd%20name/",
    "https://example.org/x",
    "//host/x",
    "",
]


@pytest.mark.parametrize("cur", CURSORS)
@pytest.mark.parametrize("url", URLS)
def test_it_links_like_cursor_link(cur: Cursor, url: str) -> None:
    assert _link(cur, url) == cur.link(url)


@pytest.mark.parametrize("cur", CURSORS)
@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize(
    "when",
    [
        None,
        T - timedelta(minutes=3),
        datetime(2026, 11, 29, 5, 0, 0, 999_999, tzinfo=UTC),  # microseconds are dropped
        datetime(2026, 11, 29, 5, 0, 0, tzinfo=timezone(timedelta(hours=2))),  # shown in UTC
    ],
)
def test_it_moves_the_cursor_like_moved_to(cur: Cursor, url: str, when: datetime | None) -> None:
    expected = cur.moved_to(when).link(url) if when else cur.link(url)
    assert at_time_link(cur, url, when) == expected
    if when:
        assert moved_query(cur.window, when) == cur.moved_to(when).query()


class Named:
    def __init__(self, kind: str, name: str, namespace: str = "") -> None:
        self.kind, self.name, self.namespace = kind, name, namespace

    def get_absolute_url(self) -> str:
        return f"/x/{self.kind}/{self.name}/"


@pytest.mark.parametrize(
    "entity,label",
    [
        (Named("pod", "train-0", "vision"), None),
        (Named("node", "h100-01"), None),
        (Named("job", "<b>&", 'ns"'), None),
        (Named("gpu", "GPU-1"), "0 · h100-01"),
        (Named('k"<', "n"), "<i>"),
    ],
)
def test_it_writes_entity_links_as_format_html_did(entity: Named, label: str | None) -> None:
    cur = CURSORS[3]
    text = label or (
        f"{entity.namespace}/{entity.name}"
        if entity.namespace and entity.kind in ("job", "pod")
        else entity.name
    )
    for when in (None, T + timedelta(seconds=5)):
        url = (
            cur.moved_to(when).link(entity.get_absolute_url())
            if when
            else cur.link(entity.get_absolute_url())
        )
        expected = format_html('<a class="ent ent-{}" href="{}">{}</a>', entity.kind, url, text)
        assert entity_link_html(entity, cur, label, when) == expected
    assert entity_link_html(None, cur) == '<span class="muted">—</span>'


@pytest.mark.parametrize("kind", ["node", "gpu", "queue", "project", "job", "pod"])
@pytest.mark.parametrize(
    "namespace,name",
    [
        ("vision", "resnet-train-0"),
        ("team.a", "ip-10-0-1-2.ec2.internal"),
        ("ns_1", "GPU-00010200-0000-0000-0000-000000000000"),
        ("x", "ünïcode"),
        ("a b", "with space"),
        ("p%", "100%"),
        ("q", "a~b"),
    ],
)
def test_it_builds_entity_urls_as_get_absolute_url_does(kind: str, namespace: str, name: str) -> None:
    cluster = Cluster(name="gpu-prod")
    for obj in (
        Entity(cluster=cluster, kind=kind, namespace=namespace, name=name),
        Ref(cluster, kind, name, namespace),
    ):
        assert _absolute_url(obj) == obj.get_absolute_url()
        assert _absolute_url(obj) == obj.get_absolute_url()  # memoized


def test_it_fails_like_get_absolute_url_for_a_pod_without_namespace() -> None:
    pod = Entity(cluster=Cluster(name="gpu-prod"), kind="pod", namespace="", name="lonely")
    with pytest.raises(NoReverseMatch):
        pod.get_absolute_url()
    with pytest.raises(NoReverseMatch):
        _absolute_url(pod)


def test_a_remembered_pill_never_mixes_plain_and_safe_text() -> None:
    from django.utils.safestring import mark_safe

    from web.templatetags.rcaweb import pill

    assert pill("Running") == '<span class="pill ok">Running</span>' and pill("Running") is pill("Running")
    assert str(pill(mark_safe("<b>x</b>"))) == '<span class="pill "><b>x</b></span>'
    assert str(pill("<b>x</b>")) == '<span class="pill ">&lt;b&gt;x&lt;/b&gt;</span>'
    assert str(pill("Running", "ok <now>")) == '<span class="pill ok">ok &lt;now&gt;</span>'


#
# The memos (each pays on the pages: bench/tag_caches.py)
#


def test_a_cursors_query_is_encoded_once_and_reused() -> None:
    from web.templatetags.rcaweb import cursor_query

    cur = Cursor(at=T + timedelta(seconds=41), window=timedelta(hours=3), window_given=True)
    before = cursor_query.cache_info()
    links = [_link(cur, f"/c/gpu-prod/nodes/n{i}/") for i in range(3)]
    after = cursor_query.cache_info()
    assert links == [cur.link(f"/c/gpu-prod/nodes/n{i}/") for i in range(3)]
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 2


def test_moving_the_cursor_to_the_same_change_twice_is_one_computation() -> None:
    cur = CURSORS[3]
    when = T + timedelta(minutes=17, seconds=3)
    before = moved_query.cache_info()
    first, second = at_time_link(cur, "/a/", when), at_time_link(cur, "/b/", when)
    after = moved_query.cache_info()
    assert first == cur.moved_to(when).link("/a/") and second == cur.moved_to(when).link("/b/")
    assert after.misses - before.misses <= 1 and after.hits - before.hits >= 1


def test_reverse_is_remembered_per_name_and_typed_arguments() -> None:
    from django.urls import clear_url_caches, reverse

    from web.templatetags.rcaweb import _reverse_memo, cached_reverse

    args = ("gpu-prod", "h100-77")
    before = _reverse_memo.cache_info()
    assert cached_reverse("collectors:node", args) == reverse("collectors:node", args=args)
    assert cached_reverse("collectors:node", args) == reverse("collectors:node", args=args)
    assert _reverse_memo.cache_info().hits - before.hits >= 1
    assert cached_reverse("incidents:incident", [1]) == cached_reverse("incidents:incident", ["1"])
    assert cached_reverse("collectors:jobs", ["gpu-prod"], {}) == reverse("collectors:jobs", args=["gpu-prod"])
    clear_url_caches()  # a changed URL conf: a new resolver, so nothing stale is reused
    assert cached_reverse("collectors:node", args) == reverse("collectors:node", args=args)


def test_an_entity_url_is_built_once_per_object_name() -> None:
    class Counting(Named):
        built = 0
        cluster = Cluster(name="gpu-prod")

        def get_absolute_url(self) -> str:
            Counting.built += 1
            return super().get_absolute_url()

    a, b = Counting("node", "memo-test-node"), Counting("node", "memo-test-node")
    assert _absolute_url(a) == _absolute_url(b) == "/x/node/memo-test-node/"
    assert Counting.built == 1  # the second object of the same name reuses the first one's URL
    assert _absolute_url(Counting("node", "memo-test-other")) == "/x/node/memo-test-other/"
    assert Counting.built == 2
