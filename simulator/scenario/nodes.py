"""Typed reading of a PyYAML node tree, collecting every problem with its line.

Why the node API and not ``yaml.safe_load``: a plain dict forgets where each
value came from, and a scenario error must name the key *and* the line. Every
reader here returns a value or ``None``; problems accumulate in a ``Reader``
so that one run reports all of them at once.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from ..durations import scenario_seconds as parse_duration

_SLUG_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_MISSING = object()
# Kubernetes' binary suffixes and its decimal ones (KAI's own units are decimal: a Queue's memory is in MB)
_BINARY_SUFFIX = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
}
_QUANTITY_RE = re.compile(r"^(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)$")
_CPU_RE = re.compile(r"^(\d+)m$")


def is_slug(text: str) -> bool:
    return bool(_SLUG_RE.match(text)) and len(text) <= 63


def line_of(node: yaml.Node) -> int:
    return node.start_mark.line + 1


def describe(node: yaml.Node, value: Any = _MISSING) -> str:
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if value is None:
        return "null"
    return repr(value if value is not _MISSING else node.value)


class Reader:
    """Collects ``(key_path, line, message)`` problems while reading nodes."""

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.problems: list[tuple[str, int, str]] = []

    def problem(self, path: str, node: yaml.Node | None, message: str, line: int | None = None) -> None:
        self.problems.append((path, line if line is not None else (line_of(node) if node else 0), message))

    def scalar(self, node: yaml.Node) -> Any:
        return self.loader.construct_object(node, deep=True)

    def mapping(
        self,
        node: yaml.Node | None,
        path: str,
        allowed: tuple[str, ...],
        required: tuple[str, ...] = (),
    ) -> dict[str, yaml.Node] | None:
        """Keys of a mapping node; unknown keys, duplicates and missing required keys are problems."""
        if node is None:
            return None
        if not isinstance(node, yaml.MappingNode):
            self.problem(path, node, f"expected a mapping, got {describe(node, self.safe(node))}")
            return None
        out: dict[str, yaml.Node] = {}
        for knode, vnode in node.value:
            key = self.safe(knode)
            if not isinstance(key, str):
                self.problem(path, knode, f"keys must be strings, got {key!r}")
                continue
            sub = f"{path}.{key}" if path else key
            if key not in allowed:
                hint = f"; expected one of: {', '.join(allowed)}" if allowed else ""
                self.problem(sub, knode, f"unknown key '{key}'{hint}")
                continue
            if key in out:
                self.problem(sub, knode, f"duplicate key '{key}'")
                continue
            out[key] = vnode
        for key in required:
            if key not in out:
                self.problem(f"{path}.{key}" if path else key, node, f"missing required key '{key}'")
        return out

    def sequence(self, node: yaml.Node | None, path: str) -> list[yaml.Node] | None:
        if node is None:
            return None
        if self.is_null(node):
            return []
        if not isinstance(node, yaml.SequenceNode):
            self.problem(path, node, f"expected a list, got {describe(node, self.safe(node))}")
            return None
        return list(node.value)

    def string(self, node: yaml.Node | None, path: str, *, slug: bool = False) -> str | None:
        if node is None:
            return None
        value = self.safe(node)
        if not isinstance(node, yaml.ScalarNode) or not isinstance(value, str):
            self.problem(path, node, f"expected a string, got {describe(node, value)}")
            return None
        if slug and not is_slug(value):
            self.problem(path, node, f"expected a slug (lowercase letters, digits and '-'), got {value!r}")
            return None
        return value

    def integer(self, node: yaml.Node | None, path: str, *, minimum: int | None = None) -> int | None:
        if node is None:
            return None
        value = self.safe(node)
        if not isinstance(node, yaml.ScalarNode) or isinstance(value, bool) or not isinstance(value, int):
            self.problem(path, node, f"expected an integer, got {describe(node, value)}")
            return None
        if minimum is not None and value < minimum:
            self.problem(path, node, f"expected an integer >= {minimum}, got {value}")
            return None
        return value

    def number(
        self, node: yaml.Node | None, path: str, *, lo: float | None = None, hi: float | None = None
    ) -> float | None:
        if node is None:
            return None
        value = self.safe(node)
        if (
            not isinstance(node, yaml.ScalarNode)
            or isinstance(value, bool)
            or not isinstance(value, int | float)
        ):
            self.problem(path, node, f"expected a number, got {describe(node, value)}")
            return None
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self.problem(path, node, f"expected a number between {lo} and {hi}, got {value}")
            return None
        return float(value)

    def boolean(self, node: yaml.Node | None, path: str) -> bool | None:
        if node is None:
            return None
        value = self.safe(node)
        if not isinstance(value, bool):
            self.problem(path, node, f"expected true or false, got {describe(node, value)}")
            return None
        return value

    def duration(self, node: yaml.Node | None, path: str, *, positive: bool = False) -> int | None:
        """A duration such as ``30s``, ``15m``, ``2h``, ``1h30m``; a bare ``0`` is allowed for offsets."""
        if node is None:
            return None
        value = self.safe(node)
        seconds: int | None = None
        if isinstance(value, str):
            seconds = parse_duration(value)
        elif value == 0 and not isinstance(value, bool) and isinstance(value, int):
            seconds = 0
        if seconds is None or (positive and seconds <= 0):
            self.problem(
                path,
                node,
                f"expected a {'positive ' if positive else ''}duration like 30s, 15m, 2h or 1h30m, "
                f"got {describe(node, value)}",
            )
            return None
        return seconds

    def choice(self, node: yaml.Node | None, path: str, choices: tuple[str, ...]) -> str | None:
        value = self.string(node, path)
        if value is None:
            return None
        if value not in choices:
            self.problem(path, node, f"expected one of {', '.join(choices)}, got {value!r}")
            return None
        return value

    def string_map(self, node: yaml.Node | None, path: str) -> dict[str, str] | None:
        """A mapping of string to string (labels, node selectors): any key, string values."""
        if node is None:
            return None
        if self.is_null(node):
            return {}
        if not isinstance(node, yaml.MappingNode):
            self.problem(path, node, f"expected a mapping, got {describe(node, self.safe(node))}")
            return None
        out: dict[str, str] = {}
        for knode, vnode in node.value:
            key = self.safe(knode)
            if not isinstance(key, str):
                self.problem(path, knode, f"keys must be strings, got {key!r}")
                continue
            value = self.string(vnode, f"{path}.{key}")
            if value is not None:
                out[key] = value
        return out

    def memory(self, node: yaml.Node | None, path: str) -> int | None:
        """A Kubernetes quantity such as ``512Gi``, ``20Gi``, ``1536Mi`` or, decimal, ``30G``, ``1500M``: bytes
        (rounded down), > 0."""
        if node is None:
            return None
        value = self.safe(node)
        m = _QUANTITY_RE.match(value.strip()) if isinstance(value, str) else None
        out = int(float(m.group(1)) * _BINARY_SUFFIX[m.group(2)]) if m else 0
        if not isinstance(node, yaml.ScalarNode) or out <= 0:
            self.problem(
                path,
                node,
                f"expected a memory quantity like 512Gi, 20Gi or 1536Mi, got {describe(node, value)}",
            )
            return None
        return out

    def cpu(self, node: yaml.Node | None, path: str) -> int | None:
        """CPU cores: a number (``64``, ``0.5``) or millicores (``500m``); returned in millicores, > 0."""
        if node is None:
            return None
        value = self.safe(node)
        out = 0
        if isinstance(value, int | float) and not isinstance(value, bool):
            out = int(round(value * 1000))
        elif isinstance(value, str) and _CPU_RE.match(value.strip()):
            out = int(value.strip()[:-1])
        if not isinstance(node, yaml.ScalarNode) or out <= 0:
            self.problem(path, node, f"expected CPU cores like 64, 0.5 or 500m, got {describe(node, value)}")
            return None
        return out

    def is_null(self, node: yaml.Node) -> bool:
        return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"

    def safe(self, node: yaml.Node) -> Any:
        if not isinstance(node, yaml.ScalarNode):
            return None
        try:
            return self.scalar(node)
        except (yaml.YAMLError, ValueError):
            return node.value
