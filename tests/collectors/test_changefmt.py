"""describe_change: a change in words shows what differs, never the same text on both sides."""

from __future__ import annotations

from collectors.changefmt import describe_change, diff_leaves, pair_texts


def _container(image: str, **kw: object) -> dict[str, object]:
    return {"name": "main", "image": image, "gpus": 8, "env": {}, "ready": True, "restart_count": 0, **kw}


def test_it_names_the_container_field_that_changed() -> None:
    old = [_container("nvcr.io/nvidia/pytorch:24.08-py3"), {"name": "sidecar", "image": "busybox:1.36"}]
    new = [_container("nvcr.io/nvidia/pytorch:24.09-py3"), {"name": "sidecar", "image": "busybox:1.36"}]
    assert (
        describe_change("containers", old, new)
        == "containers[main].image: nvcr.io/nvidia/pytorch:24.08-py3 → nvcr.io/nvidia/pytorch:24.09-py3"
    )


def test_both_sides_differ_even_when_the_values_share_a_long_prefix() -> None:
    base = "registry.example.com/research/very/long/path/to/the/training/image"
    assert pair_texts(f"{base}:1.4", f"{base}:1.5") == ("…ing/image:1.4", "…ing/image:1.5")
    text = describe_change("containers", [_container(f"{base}:1.4")], [_container(f"{base}:1.5")])
    assert text == "containers[main].image: …ing/image:1.4 → …ing/image:1.5"
    # Long values differing at the end: the shared head goes, each side stays within 60 characters.
    a, b = pair_texts("x" * 100 + "a" + "y" * 100, "x" * 100 + "b" + "y" * 100)
    assert a != b and a.startswith("…" + "x" * 12 + "a") and len(a) == len(b) == 60


def test_it_counts_further_differences_beyond_the_first_two() -> None:
    old = [_container("img:1", ready=True, restart_count=0, state="running")]
    new = [_container("img:2", ready=False, restart_count=3, state="waiting")]
    assert describe_change("containers", old, new) == (
        "containers[main].image: img:1 → img:2; containers[main].ready: true → false (+2 more)"
    )
    assert [leaf.sub for leaf in diff_leaves("containers", old, new)] == [
        "[main].image",
        "[main].ready",
        "[main].restart_count",
        "[main].state",
    ]


def test_it_shows_added_and_removed_items_of_unkeyed_lists() -> None:
    old = [{"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}]
    new = [{"key": "a", "effect": "NoSchedule"}]
    assert describe_change("tolerations", old, new) == 'tolerations: {"effect": "NoExecute", "key": "a"} → ∅'


def test_it_keeps_scalars_and_absent_values_readable() -> None:
    assert describe_change("quota_gpus", 16, 8) == "quota_gpus: 16 → 8"
    assert describe_change("limit_gpus", None, 24) == "limit_gpus: ∅ → 24"
    assert describe_change("labels", {"a": "1", "b": "2"}, {"a": "1", "b": "3"}) == "labels.b: 2 → 3"
