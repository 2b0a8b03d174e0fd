"""Label and field selectors, parsed the way the API server parses them (a subset, with its errors)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from simulator.apiserver.store import FIELD_PATHS, Entry

Predicate = Callable[[Entry], bool]


class SelectorError(ValueError):
    """Becomes a 400 BadRequest Status carrying this message."""


@dataclass(frozen=True)
class Requirement:
    """One term of a selector: ``key op values`` (``exists``/``!exists`` take no values)."""

    key: str
    op: str  # in, notin, ==, !=, exists, !exists
    values: frozenset[str] = frozenset()

    def holds(self, mapping: dict[str, str], default: str | None = None) -> bool:
        value = mapping.get(self.key, default)
        if self.op == "in" or self.op == "==":
            return value in self.values
        if self.op == "notin" or self.op == "!=":
            return value not in self.values
        if self.op == "exists":
            return self.key in mapping
        return self.key not in mapping


def _matcher(requirements: list[Requirement], attr: str, default: str | None) -> Predicate:
    def matches(entry: Entry) -> bool:
        mapping = getattr(entry, attr)
        return all(r.holds(mapping, default) for r in requirements)

    return matches


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses (``a in (x,y),b=c``)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
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
    requirements: list[Requirement] = []
    for term in _split_top(text):
        if m := _SET.match(term):
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            requirements.append(Requirement(m.group(1), m.group(2), values))
        elif m := _EQ.match(term):
            key, op, value = m.groups()
            requirements.append(Requirement(key, "!=" if op == "!=" else "==", frozenset({value})))
        elif m := _EXISTS.match(term):
            neg, key = m.groups()
            requirements.append(Requirement(key, "!exists" if neg else "exists"))
        else:
            raise SelectorError(
                f"unable to parse requirement: found '{term}', expected: in, notin, =, ==, !=, gt, lt"
            )
    return _matcher(requirements, "labels", None)


_FIELD = re.compile(r"^([A-Za-z0-9._]+)\s*(==|!=|=)\s*(.*)$")


def field_selector(text: str | None, resource: str) -> Predicate | None:
    if not text:
        return None
    requirements: list[Requirement] = []
    for term in _split_top(text):
        m = _FIELD.match(term)
        if not m:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{term}'")
        name, op, value = m.groups()
        if name not in FIELD_PATHS or not _field_applies(name, resource):
            raise SelectorError(f"field label not supported: {name}")
        requirements.append(Requirement(name, "!=" if op == "!=" else "==", frozenset({value})))
    return _matcher(requirements, "fields", "")


def _field_applies(name: str, resource: str) -> bool:
    if name.startswith("metadata."):
        return True
    if name in ("spec.nodeName", "status.phase"):
        return resource == "pods"
    return resource == "events"
