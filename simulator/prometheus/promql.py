"""The PromQL subset the simulator's Prometheus answers (grammar in ../API.md), parsed into a small AST.

Anything outside the subset is rejected with a message naming the part, the
way Prometheus answers bad_data, so a collector never silently gets a
different meaning than it asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from simulator.durations import prometheus_seconds

AGGREGATIONS = ("sum", "avg", "max", "min", "count")
RANGE_FUNCTIONS = (
    "avg_over_time",
    "max_over_time",
    "min_over_time",
    "last_over_time",
    "count_over_time",
    "rate",
    "increase",
)
COMPARISONS = (">=", "<=", "==", "!=", ">", "<")
_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
      | (?P<duration>\[[^\]]*\])
      | (?P<number>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+))
      | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
      | (?P<op>=~|!~|!=|==|>=|<=|[{}(),=<>])
      | (?P<other>\S)
    )""",
    re.VERBOSE,
)


class PromQLError(ValueError):
    """Becomes {"status": "error", "errorType": "bad_data", "error": <message>} with 400."""


@dataclass(frozen=True)
class Matcher:
    name: str
    op: str  # = != =~ !~
    value: str

    def matches(self, labels: dict[str, str]) -> bool:
        actual = labels.get(self.name, "")
        if self.op == "=":
            return actual == self.value
        if self.op == "!=":
            return actual != self.value
        hit = re.fullmatch(self.value, actual) is not None
        return hit if self.op == "=~" else not hit


@dataclass(frozen=True)
class Selector:
    metric: str | None
    matchers: tuple[Matcher, ...]
    offset_s: float = 0  # the "offset" modifier: read the data as of t - offset


@dataclass(frozen=True)
class RangeFunction:
    name: str
    selector: Selector
    range_s: float


@dataclass(frozen=True)
class Aggregation:
    op: str
    by: tuple[str, ...]
    expr: Expr


@dataclass(frozen=True)
class Comparison:
    expr: Expr
    op: str
    value: Number | Time  # a scalar: a number, or time()


@dataclass(frozen=True)
class Number:
    value: float


@dataclass(frozen=True)
class Time:
    """time(): the evaluation time in seconds since the epoch, a scalar."""


Expr = Selector | RangeFunction | Aggregation | Comparison | Number | Time


def parse_duration(text: str) -> float:
    """Seconds of a PromQL duration, in Prometheus' own syntax (``simulator.durations``)."""
    seconds = prometheus_seconds(text)
    if seconds is None:
        raise PromQLError(f'bad duration "{text}": expected e.g. 30s, 5m, 1h, 1h30m, 1d')
    return seconds


def _tokens(query: str) -> list[tuple[str, str]]:
    out = []
    for m in _TOKEN.finditer(query):
        kind = m.lastgroup or "other"
        out.append((kind, m.group(kind)))
    return out


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.toks = _tokens(query)
        self.pos = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise PromQLError(f"unexpected end of input in {self.query!r}")
        self.pos += 1
        return tok

    def expect(self, value: str) -> None:
        kind, text = self.take()
        if text != value:
            raise PromQLError(f'unexpected "{text}", expected "{value}"')

    def parse(self) -> Expr:
        if not self.toks:
            raise PromQLError("empty query")
        expr = self.expr()
        tok = self.peek()
        if tok is not None:
            _kind, text = tok
            if text in ("+", "-", "*", "/", "%", "^") or text in ("and", "or", "unless", "offset", "@"):
                raise PromQLError(f'unsupported in the simulator\'s PromQL subset: operator "{text}"')
            raise PromQLError(f'unexpected "{text}" at the end of the query')
        return expr

    def expr(self) -> Expr:
        left = self.operand()
        tok = self.peek()
        if tok is not None and tok[1] in COMPARISONS:
            op = self.take()[1]
            right = self.operand()
            if isinstance(left, Number | Time):
                if isinstance(right, Number | Time):
                    raise PromQLError(
                        "comparison between two scalars needs the bool modifier, which the subset does not support"
                    )
                raise PromQLError(
                    "unsupported in the simulator's PromQL subset: a scalar on the left of a comparison"
                )
            if isinstance(right, Number | Time):
                return Comparison(left, op, right)
            raise PromQLError("unsupported in the simulator's PromQL subset: comparison between two vectors")
        return left

    def operand(self) -> Expr:
        kind, text = self.take()
        if kind == "number":
            return Number(float(text))
        if kind == "op" and text == "{":
            return self.selector(None)
        if kind == "op" and text == "(":
            inner = self.expr()
            self.expect(")")
            return inner
        if kind != "ident":
            raise PromQLError(f'unexpected "{text}"')
        if text in AGGREGATIONS:
            return self.aggregation(text)
        if text in ("without",):
            raise PromQLError('unsupported in the simulator\'s PromQL subset: "without"')
        nxt = self.peek()
        if text == "time" and nxt is not None and nxt[1] == "(":
            self.take()
            self.expect(")")
            return Time()
        if nxt is not None and nxt[1] == "(":
            if text not in RANGE_FUNCTIONS:
                raise PromQLError(f'unsupported in the simulator\'s PromQL subset: function "{text}"')
            self.take()
            sel_kind, sel_text = self.take()
            if sel_kind == "op" and sel_text == "{":
                selector = self.selector(None, in_range=True)
            elif sel_kind == "ident":
                selector = self.selector(sel_text, braces=False, in_range=True)
            else:
                raise PromQLError(f'{text}() takes a range vector selector, got "{sel_text}"')
            rng = self.peek()
            if rng is None or rng[0] != "duration":
                raise PromQLError(f"{text}() takes a range vector selector like x[5m]")
            self.take()
            body = rng[1][1:-1].strip()
            if ":" in body:
                raise PromQLError(f'unsupported in the simulator\'s PromQL subset: subquery "{rng[1]}"')
            selector = self.modifiers(selector)
            self.expect(")")
            return RangeFunction(text, selector, parse_duration(body))
        return self.selector(text, braces=False)

    def selector(self, metric: str | None, braces: bool = True, in_range: bool = False) -> Selector:
        matchers: list[Matcher] = []
        if not braces:
            nxt = self.peek()
            if nxt is not None and nxt[1] == "{":
                self.take()
                braces = True
        if braces:
            while True:
                kind, text = self.take()
                if text == "}":
                    break
                if kind != "ident":
                    raise PromQLError(f'unexpected "{text}" in label matchers')
                op = self.take()[1]
                if op not in ("=", "!=", "=~", "!~"):
                    raise PromQLError(f'unexpected "{op}" after label "{text}": expected =, !=, =~ or !~')
                skind, sval = self.take()
                if skind != "string":
                    raise PromQLError(f'label "{text}" needs a quoted value, got "{sval}"')
                value = bytes(sval[1:-1], "utf-8").decode("unicode_escape")
                if op in ("=~", "!~"):
                    try:
                        re.compile(value)
                    except re.error as exc:
                        raise PromQLError(f'invalid regular expression "{value}": {exc}') from exc
                if text == "__name__" and op == "=":
                    metric = value
                else:
                    matchers.append(Matcher(text, op, value))
                sep = self.take()[1]
                if sep == "}":
                    break
                if sep != ",":
                    raise PromQLError(f'unexpected "{sep}" in label matchers')
        nxt = self.peek()
        if nxt is not None and nxt[0] == "duration" and not in_range:
            raise PromQLError(
                f'a range vector "{nxt[1]}" is only supported inside {", ".join(RANGE_FUNCTIONS)}'
            )
        if metric is None and not any(m.op == "=" and m.value for m in matchers):
            raise PromQLError("vector selector must contain at least one non-empty matcher")
        selector = Selector(metric, tuple(matchers))
        return selector if in_range else self.modifiers(selector)

    def modifiers(self, selector: Selector) -> Selector:
        """``offset <duration>`` after a selector (after the range, for a range selector); ``@`` is rejected."""
        nxt = self.peek()
        if nxt is not None and nxt[1] == "@":
            raise PromQLError('unsupported in the simulator\'s PromQL subset: "@" modifier')
        if nxt is None or nxt[1] != "offset":
            return selector
        self.take()
        kind, text = self.take()
        negative = text.startswith("-")
        if text == "-":
            kind, text = self.take()
        # the tokenizer reads "5m" as the number 5 then the identifier m: glue them back
        while (
            (nxt := self.peek()) is not None and nxt[0] in ("ident", "number") and kind in ("number", "ident")
        ):
            if not re.fullmatch(r"[0-9dhms]+", nxt[1]):
                break
            self.take()
            text += nxt[1]
        if negative:
            raise PromQLError("unsupported in the simulator's PromQL subset: a negative offset")
        text = text.lstrip("+")
        return Selector(selector.metric, selector.matchers, parse_duration(text))

    def labels(self) -> tuple[str, ...]:
        self.expect("(")
        names: list[str] = []
        while True:
            kind, text = self.take()
            if text == ")":
                break
            if kind != "ident":
                raise PromQLError(f'unexpected "{text}" in grouping labels')
            names.append(text)
            sep = self.take()[1]
            if sep == ")":
                break
            if sep != ",":
                raise PromQLError(f'unexpected "{sep}" in grouping labels')
        return tuple(names)

    def aggregation(self, op: str) -> Aggregation:
        by: tuple[str, ...] = ()
        nxt = self.peek()
        if nxt is not None and nxt[1] == "without":
            raise PromQLError('unsupported in the simulator\'s PromQL subset: "without"')
        if nxt is not None and nxt[1] == "by":
            self.take()
            by = self.labels()
        self.expect("(")
        inner = self.expr()
        self.expect(")")
        nxt = self.peek()
        if nxt is not None and nxt[1] == "without":
            raise PromQLError('unsupported in the simulator\'s PromQL subset: "without"')
        if nxt is not None and nxt[1] == "by":
            if by:
                raise PromQLError("aggregation has two by clauses")
            self.take()
            by = self.labels()
        return Aggregation(op, by, inner)


def parse(query: str) -> Expr:
    return _Parser(query).parse()
