"""Label and field selectors, parsed the way the API server parses them (a subset, with its errors)."""

from __future__ import annotations

import re
from collections.abc import Callable

from collectors.sim.apiserver.store import FIELD_PATHS, Entry

Predicate = Callable[[Entry], bool]


class SelectorError(ValueError):
    """Becomes a 400 BadRequest Status carrying this message."""


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b=c``)."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if cur or parts:
        parts.append("".join(cur).strip())
    return [p for p in parts if p]


_SET = re.compile(r"^([A-Za-z0-9._/-]+)\s+(in|notin)\s+\((.*)\)$")
_EQ = re.compile(r"^([A-Za-z0-9._/-]+)\s*(==|!=|=)\s*([A-Za-z0-9._-]*)$")
_EXISTS = re.compile(r"^(!?)([A-Za-z0-9._/-]+)$")


def label_selector(text: str | None) -> Predicate | None:
    if not text:
        return None
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_top(text):
        if m := _SET.match(term):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",") if v.strip()}
            if op == "in":
                checks.append(lambda lb, k=key, vs=values: lb.get(k) in vs)
            else:
                checks.append(lambda lb, k=key, vs=values: lb.get(k) not in vs)
        elif m := _EQ.match(term):
            key, op, value = m.groups()
            if op == "!=":
                checks.append(lambda lb, k=key, v=value: lb.get(k) != v)
            else:
                checks.append(lambda lb, k=key, v=value: lb.get(k) == v)
        elif m := _EXISTS.match(term):
            neg, key = m.groups()
            if neg:
                checks.append(lambda lb, k=key: k not in lb)
            else:
                checks.append(lambda lb, k=key: k in lb)
        else:
            raise SelectorError(
                f"unable to parse requirement: found '{term}', expected: in, notin, =, ==, !=, gt, lt"
            )
    return lambda entry: all(check(entry.labels) for check in checks)


_FIELD = re.compile(r"^([A-Za-z0-9._]+)\s*(==|!=|=)\s*(.*)$")


def field_selector(text: str | None, resource: str) -> Predicate | None:
    if not text:
        return None
    checks: list[Callable[[dict[str, str]], bool]] = []
    for term in _split_top(text):
        m = _FIELD.match(term)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, value = m.groups()
        if name not in FIELD_PATHS or not _field_applies(name, resource):
            raise SelectorError(f"field label not supported: {name}")
        if op == "!=":
            checks.append(lambda f, n=name, v=value: f.get(n, "") != v)
        else:
            checks.append(lambda f, n=name, v=value: f.get(n, "") == v)
    return lambda entry: all(check(entry.fields) for check in checks)


def _field_applies(name: str, resource: str) -> bool:
    if name.startswith("metadata."):
        return True
    if name in ("spec.nodeName", "status.phase"):
        return resource == "pods"
    return resource == "events"
