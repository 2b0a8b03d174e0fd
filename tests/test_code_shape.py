"""No module over 400 lines and no function over 80 without a written reason (docs/conventions.md §1).

A long module or function is allowed when it says why: a module carries ``# size: <why>`` in its first 30
lines, a function ``# length: <why>`` on its ``def`` line or the line above it (above its first decorator
when it has some). A marker with nothing after the colon is no reason. The walk covers the product's own
packages, not their migrations (generated) and not the tests.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("rcaweb", "collectors", "incidents", "web", "simulator", "harness", "cause_codes")
MODULE_MAX = 400  # lines
FUNCTION_MAX = 80  # lines, decorators not counted: the def line to the last line of the body
REASON_WITHIN = 30  # a module's "# size:" comment sits in its first lines, where a reader sees it
SIZE = re.compile(r"#\s*size:\s*\S")
LENGTH = re.compile(r"#\s*length:\s*\S")


def comments(source: str) -> dict[int, str]:
    """Each line's comment, by line number (tokens, so a "# size:" inside a string is not one)."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string
    return out


def offences(source: str, name: str) -> list[str]:
    """What of ``source`` (the module ``name``) is over a limit without a reason, one line each."""
    notes = comments(source)
    out = []
    lines = len(source.splitlines())
    if lines > MODULE_MAX and not any(SIZE.match(text) for n, text in notes.items() if n <= REASON_WITHIN):
        out.append(
            f"{name}: {lines} lines > {MODULE_MAX} (split it, or say why: '# size: <why>' in its first lines)"
        )
    for node in ast.walk(ast.parse(source, filename=name)):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        length = (node.end_lineno or node.lineno) - node.lineno + 1
        if length <= FUNCTION_MAX:
            continue
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        where = {node.lineno, node.lineno - 1, first - 1}
        if not any(LENGTH.match(notes.get(n, "")) for n in where):
            out.append(
                f"{name}:{node.lineno} {node.name}: {length} lines > {FUNCTION_MAX}"
                " (split it into named steps, or say why: '# length: <why>' on or above its def)"
            )
    return out


def package_offences(package: str) -> list[str]:
    out = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT)
        if "migrations" in rel.parts:
            continue
        out.extend(offences(path.read_text(encoding="utf-8"), str(rel)))
    return out


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_or_function_is_over_its_limit_without_a_reason(package: str) -> None:
    found = package_offences(package)
    assert not found, f"{len(found)} over the limits in {package}/:\n" + "\n".join(found)


#
# The check itself
#


def module(lines: int, head: str = "") -> str:
    return head + "".join(f"x{i} = {i}\n" for i in range(lines - head.count("\n")))


def function(lines: int, above: str = "", on_def: str = "", decorators: str = "") -> str:
    body = "".join(f"    y{i} = {i}\n" for i in range(lines - 1))
    return f"{above}{decorators}def f():{on_def}\n{body}"


def test_it_names_a_long_module_and_a_long_function() -> None:
    assert offences(module(MODULE_MAX), "m.py") == []
    assert offences(module(MODULE_MAX + 1), "m.py") == [
        "m.py: 401 lines > 400 (split it, or say why: '# size: <why>' in its first lines)"
    ]
    assert offences(function(FUNCTION_MAX), "m.py") == []
    (found,) = offences("\n" + function(FUNCTION_MAX + 1), "m.py")
    assert found.startswith("m.py:2 f: 81 lines > 80")


def test_a_reason_excuses_only_when_it_says_something_and_sits_where_a_reader_looks() -> None:
    assert (
        offences(module(MODULE_MAX + 50, '"""Doc."""\n# size: one table per kind, read top to bottom\n'), "m")
        == []
    )
    assert offences(module(MODULE_MAX + 50, "# size:\n"), "m")  # no reason given
    assert offences(module(MODULE_MAX + 50, "\n" * REASON_WITHIN + "# size: too far down\n"), "m")
    assert offences(module(MODULE_MAX + 50, 'S = "# size: a string, not a comment"\n'), "m")

    long = FUNCTION_MAX + 5
    assert offences(function(long, above="# length: one branch per message format\n"), "m") == []
    assert offences(function(long, on_def="  # length: a state machine"), "m") == []
    deco = "@decorator\n@other(1)\n"
    assert offences(function(long, above="# length: a table\n", decorators=deco), "m") == []
    assert offences(function(long, above="# length:\n"), "m")
    assert offences(function(long, above="# length: not adjacent\n\n"), "m")
