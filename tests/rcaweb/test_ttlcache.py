"""rcaweb.ttlcache: entries live for the ttl given at each call, and the cache stays bounded."""

from __future__ import annotations

from unittest import mock

from rcaweb.ttlcache import TtlCache


def test_an_entry_is_read_while_younger_than_the_ttl() -> None:
    cache: TtlCache[str] = TtlCache(max_entries=4)
    with mock.patch("rcaweb.ttlcache.time.monotonic", return_value=100.0):
        cache.put("k", "v", ttl=60)
    with mock.patch("rcaweb.ttlcache.time.monotonic", return_value=159.0):
        assert cache.get("k", ttl=60) == "v"
    with mock.patch("rcaweb.ttlcache.time.monotonic", return_value=161.0):
        assert cache.get("k", ttl=60) is None


def test_a_ttl_of_zero_keeps_and_reads_nothing() -> None:
    cache: TtlCache[str] = TtlCache(max_entries=4)
    cache.put("k", "v", ttl=0)
    assert len(cache) == 0
    cache.put("k", "v", ttl=60)
    assert cache.get("k", ttl=0) is None


def test_when_full_the_expired_go_first_else_the_oldest_half() -> None:
    cache: TtlCache[int] = TtlCache(max_entries=4)
    for i in range(4):
        with mock.patch("rcaweb.ttlcache.time.monotonic", return_value=float(i * 10)):
            cache.put(i, i, ttl=20)
    with mock.patch("rcaweb.ttlcache.time.monotonic", return_value=36.0):
        cache.put(4, 4, ttl=20)  # 0 and 1 (at 0 s and 10 s) have expired; 2 and 3 have not
        assert [cache.get(k, ttl=20) for k in range(5)] == [None, None, 2, 3, 4]
    for i in range(5, 7):
        with mock.patch("rcaweb.ttlcache.time.monotonic", return_value=36.0):
            cache.put(i, i, ttl=20)  # full again, nothing expired: the oldest half goes
    assert len(cache) <= 4
