"""A recorded change in words: only the part that differs, so both sides never read the same.

``Change`` rows compare lists whole (``observed.diff_states``): a pod's ``containers`` change stores both
complete container lists, and cutting each side at 60 characters shows the same prefix twice and hides what
moved. Here a change is walked down to its differing leaves: dict keys, list items matched by ``name`` (or
another unique identity key), by index when the lengths agree, else as removed/added items. Long texts
that share a prefix keep only the tail where they start to differ.

Pure functions, no Django: the incident timeline (``incidents.evidence``), the ``/changes/`` page (the
``change_diff`` template tag) and the ``recent_change`` hypothesis (``incidents.diagnosis.changes``) all
word changes through ``describe_change``/``diff_leaves``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

ABSENT = "∅"
LIMIT = 60  # characters per side
IDENTITY_KEYS = ("name", "uid", "uuid", "type", "key")  # what makes a list item the same item on both sides
MAX_DEPTH = 8


@dataclass(frozen=True)
class Leaf:
    """One differing part: ``path`` from the change's field (``sub`` relative to it), both sides as text."""

    path: str
    sub: str
    old: str
    new: str

    def __str__(self) -> str:
        return f"{self.path}: {self.old} → {self.new}"


def value_text(value: Any) -> str:
    """A stored JSON value as one line: strings as they are, None as ∅, the rest as compact JSON."""
    if value is None:
        return ABSENT
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, sort_keys=True, separators=(", ", ": "), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def pair_texts(old: Any, new: Any, limit: int = LIMIT) -> tuple[str, str]:
    """Both sides, each at most ``limit`` characters; a long shared prefix becomes "…" before where they differ."""
    a, b = value_text(old), value_text(new)
    if len(a) <= limit and len(b) <= limit:
        return a, b
    p = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        p += 1
    keep = 12  # context before the first difference
    if p > keep + 1:
        a, b = "…" + a[p - keep :], "…" + b[p - keep :]
    return _cut(a, limit), _cut(b, limit)


def diff_leaves(field: str, old: Any, new: Any) -> list[Leaf]:
    """The differing leaves of a change of ``field`` from ``old`` to ``new`` (empty when they are equal)."""
    out: list[tuple[str, Any, Any]] = []
    _walk(old, new, "", out, 0)
    leaves = []
    for sub, o, n in out:
        ot, nt = pair_texts(o, n)
        leaves.append(Leaf(path=_join(field, sub), sub=sub, old=ot, new=nt))
    return leaves


def describe_change(field: str, old: Any, new: Any, *, most: int = 2) -> str:
    """``field[.sub]: old → new`` for the first ``most`` differing parts, then "(+n more)"."""
    leaves = diff_leaves(field, old, new)
    if not leaves:
        a, b = pair_texts(old, new)
        return f"{field}: {a} → {b}"
    text = "; ".join(str(leaf) for leaf in leaves[:most])
    return text + (f" (+{len(leaves) - most} more)" if len(leaves) > most else "")


def _walk(old: Any, new: Any, path: str, out: list[tuple[str, Any, Any]], depth: int) -> None:
    if old == new:
        return
    if depth >= MAX_DEPTH:
        out.append((path, old, new))
    elif isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new), key=str):
            _walk(old.get(key), new.get(key), f"{path}.{key}" if path else str(key), out, depth + 1)
    elif isinstance(old, list) and isinstance(new, list):
        _walk_list(old, new, path, out, depth)
    else:
        out.append((path, old, new))


def _walk_list(
    old: list[Any], new: list[Any], path: str, out: list[tuple[str, Any, Any]], depth: int
) -> None:
    key = _identity_key(old, new)
    if key is not None:
        olds = {item[key]: item for item in old}
        news = {item[key]: item for item in new}
        order = [item[key] for item in old] + [item[key] for item in new if item[key] not in olds]
        for ident in order:
            _walk(olds.get(ident), news.get(ident), f"{path}[{ident}]", out, depth + 1)
    elif len(old) == len(new):
        for i, (o, n) in enumerate(zip(old, new, strict=True)):
            _walk(o, n, f"{path}[{i}]", out, depth + 1)
    else:
        removed = [x for x in old if x not in new]
        added = [x for x in new if x not in old]
        if not removed and not added:  # same items, other multiplicities or order
            out.append((path, old, new))
            return
        out.append((path, _one_or_list(removed), _one_or_list(added)))


def _identity_key(old: list[Any], new: list[Any]) -> str | None:
    items = old + new
    if not items or not all(isinstance(x, dict) for x in items):
        return None
    for key in IDENTITY_KEYS:
        if all(isinstance(x.get(key), str | int) and x.get(key) != "" for x in items) and all(
            len({x[key] for x in side}) == len(side) for side in (old, new)
        ):
            return key
    return None


def _one_or_list(items: list[Any]) -> Any:
    if not items:
        return None
    return items[0] if len(items) == 1 else items


def _join(field: str, sub: str) -> str:
    if not sub:
        return field
    if not field:
        return sub
    return f"{field}{sub}" if sub.startswith("[") else f"{field}.{sub}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
