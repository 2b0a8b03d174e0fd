"""The "changes around t" rows (web.inventory.entity_page.change_rows_html): they escape what they are given and keep
what Django made safe."""

from __future__ import annotations

import pytest
from django.template import Context, Template
from django.utils.html import format_html

from web.inventory.entity_page import ChangeRow, _escape, change_rows_html


def _rows() -> list[ChangeRow]:
    return [
        ChangeRow(
            cursor_before=True,  # change_rows marks the first row after t
            after=True,
            at_url="/c/x/nodes/n/?t=1&w=2",
            hms="01:02:03",
            relative="5m after",
            object=format_html('<a href="{}">{}</a>', "/c/x/nodes/n/", "n"),
            field='<script>alert("x")</script>',
            old_new="a → <b>",
            source="k8s",
            actor="o'neil & co",
            link="https://example.com/run?a=1&b=2",
        )
    ]


def test_hostile_text_is_escaped_and_safe_markup_kept():
    html = change_rows_html(_rows(), 0, "2026-11-29T00:00:00Z")
    assert "<script>" not in html and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert '<a href="/c/x/nodes/n/">n</a>' in html  # format_html output is not escaped twice
    assert "a → &lt;b&gt;" in html and "o&#x27;neil &amp; co" in html
    assert 'href="/c/x/nodes/n/?t=1&amp;w=2"' in html
    assert 'href="https://example.com/run?a=1&amp;b=2"' in html
    assert html.count("cursor-row") == 1  # every change is after t: the "t = …" row goes first
    assert html.index("cursor-row") < html.index("01:02:03")


def test_the_t_row_goes_last_when_every_change_is_before_t():
    rows = [_rows()[0]._replace(cursor_before=False, after=False)]
    html = change_rows_html(rows, 1, "2026-11-29T00:00:00Z")
    assert html.count("cursor-row") == 1 and html.index("cursor-row") > html.index("01:02:03")
    assert 'class="after"' not in html


def test_the_rows_escape_as_the_template_engine_does():
    row = _rows()[0]
    expected = Template("{{ v }}")
    for value in (row.field, row.actor, row.object, "é & <i>"):
        assert _escape(value) == expected.render(Context({"v": value}))


@pytest.mark.parametrize(
    "value", [True, False, 0, -7, 2**70, 1.5, "x", [1, {"b": 2, "a": None}], {"k": True}]
)
def test_compact_prints_what_json_prints(value):
    import json

    from web.templatetags.rcaweb import compact

    expected = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))
    assert compact(value) == expected
