"""Walk the whole URL conf and turn every pattern into a concrete path, so tests cover pages added later.

Path parameters get sample values by converter and name; ``overrides`` lets a test map a parameter
name to a value that exists in its data (``{"cluster": "gpu-prod", "namespace": "nlp"}``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from django.urls import URLPattern, URLResolver, get_resolver, resolve
from django.urls.resolvers import RegexPattern, RoutePattern

SAMPLES_BY_CONVERTER = {
    "int": "1",
    "slug": "x",
    "str": "x",
    "path": "x/y",
    "uuid": "00000000-0000-0000-0000-000000000001",
}
REGEX_CANDIDATES = ["1", "x", "auth", "x/y"]
_ROUTE_PARAM = re.compile(r"<(?:(?P<conv>[^>:]+):)?(?P<name>\w+)>")
_REGEX_GROUP = re.compile(r"\(\?P<(?P<name>\w+)>(?P<body>(?:[^()]|\([^()]*\))*)\)")


@dataclass
class Page:
    path: str
    name: str  # namespaced URL name, or the view's dotted path when unnamed


def _route_sample(route: str, overrides: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        return overrides.get(m["name"], SAMPLES_BY_CONVERTER.get(m["conv"] or "str", "x"))

    return _ROUTE_PARAM.sub(repl, route)


def _regex_sample(regex: str, overrides: dict[str, str]) -> str:
    def repl(m: re.Match) -> str:
        if m["name"] in overrides:
            return overrides[m["name"]]
        for cand in REGEX_CANDIDATES:
            if re.fullmatch(m["body"], cand):
                return cand
        return "x"

    text = _REGEX_GROUP.sub(repl, regex)
    return text.lstrip("^").rstrip("$").replace("\\", "")


def _sample(pattern: object, overrides: dict[str, str]) -> str:
    if isinstance(pattern, RoutePattern):
        return _route_sample(str(pattern), overrides)
    if isinstance(pattern, RegexPattern):
        return _regex_sample(pattern._regex, overrides)
    return str(pattern)


def walk(overrides: dict[str, str] | None = None) -> Iterator[Page]:
    """Every leaf pattern of the root URL conf as a concrete path that resolves back to that pattern."""
    ov = overrides or {}

    def inner(patterns: list, prefix: str, ns: str) -> Iterator[Page]:
        for p in patterns:
            if isinstance(p, URLResolver):
                sub_ns = f"{ns}{p.namespace}:" if p.namespace else ns
                yield from inner(p.url_patterns, prefix + _sample(p.pattern, ov), sub_ns)
            elif isinstance(p, URLPattern):
                view = p.lookup_str
                yield Page(
                    path="/" + prefix + _sample(p.pattern, ov), name=f"{ns}{p.name}" if p.name else view
                )

    yield from inner(get_resolver().url_patterns, "", "")


def resolvable(page: Page) -> bool:
    try:
        resolve(page.path.split("?")[0])
    except Exception:
        return False
    return True
