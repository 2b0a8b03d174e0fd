"""rcaweb.rows: Jinja2 row fragments escape what they are given and keep what Django made safe."""

from __future__ import annotations

import jinja2
import pytest
from django.utils.html import format_html

from rcaweb.rows import environment, render_rows


def test_hostile_text_is_escaped_and_safe_markup_kept():
    rows = [
        {
            "cursor_before": True,  # change_rows marks the first row after t
            "after": True,
            "at_url": "/c/x/nodes/n/?t=1&w=2",
            "hms": "01:02:03",
            "relative": "5m after",
            "object": format_html('<a href="{}">{}</a>', "/c/x/nodes/n/", "n"),
            "field": '<script>alert("x")</script>',
            "old_new": "a → <b>",
            "source": "k8s",
            "actor": "o'neil & co",
            "link": "",
        }
    ]
    html = render_rows("collectors/_change_rows.jinja", rows=rows, before=0, t_utc="2026-11-29T00:00:00Z")
    assert "<script>" not in html and "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    assert '<a href="/c/x/nodes/n/">n</a>' in html  # format_html output is not escaped twice
    assert "a → &lt;b&gt;" in html and "o&#39;neil &amp; co" in html
    assert 'href="/c/x/nodes/n/?t=1&amp;w=2"' in html
    assert html.count("cursor-row") == 1  # every change is after t: the "t = …" row goes first


def test_a_misspelt_name_fails_instead_of_rendering_empty():
    with pytest.raises(jinja2.UndefinedError):
        environment().from_string("{{ row.nope }}").render(row={})


@pytest.mark.parametrize("value", [True, False, 0, -7, 2**70, 1.5, "x", [1, {"b": 2, "a": None}], {"k": True}])
def test_compact_prints_what_json_prints(value):
    import json

    from rcaweb.templatetags.rcaweb import compact

    expected = value if isinstance(value, str) else json.dumps(value, sort_keys=True, separators=(", ", ": "))
    assert compact(value) == expected
