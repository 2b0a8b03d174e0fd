"""The hot columns of ``EntityVersion`` an as-of read may filter on (each leads an index with the as-of range)."""

from __future__ import annotations

from collections.abc import Mapping

HOT_COLUMNS = frozenset({"node", "namespace", "queue", "project", "job", "pod", "phase"})


def check_hot_columns(hot: Mapping[str, str]) -> None:
    """Refuse a filter on a column that is not hot (it would read the whole as-of range)."""
    unknown = set(hot) - HOT_COLUMNS
    if unknown:
        raise ValueError(f"not a hot column of EntityVersion: {', '.join(sorted(unknown))}")
