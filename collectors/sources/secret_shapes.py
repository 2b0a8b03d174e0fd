"""Credentials found in free text by their shape: headers, bearer tokens, URLs with credentials, CLI flags,
assignments in JSON, YAML, ini, env and XML, cloud and SaaS key formats, JWTs and PEM blocks. Each shape
either masks by a pattern alone or finds where its value ends (:func:`_value_end`); :func:`mask_secrets`
runs them all. The policy in words: docs/collectors.md#redaction and :mod:`collectors.sources.redact`."""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

from collectors.sources.secret_names import MAYBE_SECRET_NAME, is_secret_name

REDACTED = "[redacted]"


def _basic(m: re.Match[str]) -> str:
    """``Basic <base64>`` outside a header: masked only when it decodes to ``user:password``."""
    try:
        decoded = base64.b64decode(m.group(2), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return m.group(0)
    return m.group(1) + REDACTED if ":" in decoded else m.group(0)


#
# Where a value ends
#

_QUOTES = "\"'`"
_OPENER = {")": "(", "]": "[", "}": "{"}
_SPACE = re.compile(r"\s")


def _value_end(
    text: str, start: int, *, to_eol: bool = False, enclosing: str = "", spaces: bool = False
) -> int:
    """The end of the value that starts at ``start``.

    A quoted value runs to its closing quote (backslash escapes skipped, as in JSON; ``\\"value\\"`` inside a
    JSON string to its ``\\"``), or to the end of its line if none closes it. An unquoted one runs to the next
    whitespace (``to_eol``: to the end of the line), or to the quote that encloses the whole assignment
    (``-H 'Authorization: Bearer x'``; with ``spaces``, whitespace included: a header's value may hold some). Closers the value did not open (the ``}`` of ``{password: x}``) and a
    trailing comma are left out; every other character, ``; & ' <`` included, is the value's.
    """
    n = len(text)
    eol = text.find("\n", start)
    eol = n if eol < 0 else eol
    if start >= eol:
        return start
    escaped = text.startswith(('\\"', "\\'"), start)
    if text[start] in _QUOTES or escaped:
        quote = text[start + 1] if escaped else text[start]
        i = start + (2 if escaped else 1)
        while i < eol:
            if escaped and text.startswith("\\" + quote, i):
                return i + 2
            if text[i] == "\\":
                i += 2
                continue
            if text[i] == quote and not escaped:
                return i + 1
            i += 1
        return eol
    end = eol
    if not to_eol and not (enclosing and spaces):
        m = _SPACE.search(text, start, eol)
        end = m.start() if m else eol
    if enclosing:
        q = text.find(enclosing, start, end)
        end = q if q >= 0 else end
    while end > start:
        last = text[end - 1]
        if last in ", \t\r" or (
            last in _OPENER and text.count(last, start, end) > text.count(_OPENER[last], start, end)
        ):
            end -= 1
        else:
            break
    return end


def _masked(value: str) -> str:
    """``value`` masked, keeping its quotes so that the line still reads as it was written."""
    for q in ('\\"', "\\'", '"', "'", "`"):
        if value.startswith(q) and len(value) >= 2 * len(q) and value.endswith(q):
            return q + REDACTED + q
        if value.startswith(q):
            return q + REDACTED
    return REDACTED


def _enclosing(text: str, start: int) -> str:
    """The quote just before an unquoted key or header (``"password=x y"``, ``-H 'Authorization: …'``)."""
    return text[start - 1] if start > 0 and text[start - 1] in _QUOTES else ""


def _mask_spans(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each (start, end) span masked; spans are in order and an overlapping one is skipped."""
    out, pos = [], 0
    for s, e in spans:
        if s < pos or e <= s:
            continue
        out += [text[pos:s], _masked(text[s:e])]
        pos = e
    out.append(text[pos:])
    return "".join(out)


#
# Shapes masked by a pattern alone
#

_URL_SCHEME = r"[a-zA-Z][a-zA-Z0-9+.\-]*://"
_AUTH_SCHEMES = r"(?:bearer|basic|token|digest|negotiate|ntlm|apikey|sso-key|aws4-hmac-sha256|hmac|dpop)"
# A value masked already by an earlier shape, perhaps after its scheme word ("Bearer [redacted]").
_ALREADY = re.compile(rf"(?i)[\"'`\\]*(?:{_AUTH_SCHEMES}[ \t]+)?\[redacted\]")

_TEXT_PATTERNS: list[tuple[re.Pattern[str], Any]] = [
    # PEM private key blocks (a truncated block is masked to the end of the text).
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.DOTALL
        ),
        lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY-----{REDACTED}-----END {m.group(1)}PRIVATE KEY-----",
    ),
    (re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])"), _basic),
    # Webhook URLs whose path is the credential: Slack, Discord, Microsoft Teams/Power Automate, Mattermost.
    (
        re.compile(
            r"(?i)\b(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:[\w-]+\.)?discord(?:app)?\.com/api/webhooks"
            r"|[\w.-]+\.webhook\.office\.com/webhookb2|[\w.-]+/hooks)/)[^\s\"'<>]+"
        ),
        r"\1" + REDACTED,
    ),
    # URLs with credentials: scheme://user:pass@host (the password runs to the authority's last "@", so one
    # holding an unencoded "@" or ";" is masked whole), and scheme://<long token>@host.
    (re.compile(rf"({_URL_SCHEME}[^\s:/@?#\"'<>]*:)([^\s/?#]*)(@)"), r"\1" + REDACTED + r"\3"),
    (re.compile(rf"({_URL_SCHEME})([A-Za-z0-9_\-]{{20,}})(@)"), r"\1" + REDACTED + r"\3"),
    # Well-known key shapes even without a name.
    (
        re.compile(
            r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|glpat-[A-Za-z0-9_\-]{20,}"
            r"|xox[abposr]-[A-Za-z0-9\-]{10,}|xapp-[A-Za-z0-9\-]{10,}"
            r"|(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}"
            r"|AIza[0-9A-Za-z_\-]{35}|ya29\.[0-9A-Za-z_\-]{20,}"
            r"|sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"
            r"|hf_[A-Za-z0-9]{30,}|npm_[A-Za-z0-9]{36}|wandb_v1_[A-Za-z0-9]{16,}|SG\.[\w\-]{16,}\.[\w\-]{16,})"
        ),
        REDACTED,
    ),
    # JWTs (header.payload.signature, the signature may be empty for alg "none").
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]*"), REDACTED),
]


#
# Shapes whose value _value_end measures
#

# Authorization / Proxy-Authorization headers: the whole credential, whatever the scheme.
_AUTH_HEADER = re.compile(
    rf"(?i)\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*(?:{_AUTH_SCHEMES}[ \t]+)?(?=[^\s])"
)
# "Bearer <token>" anywhere (curl -H, error messages), quoted or not, any length; not "bearer token expired".
_BEARER = re.compile(
    r"(?i)\bbearer[ \t]+(?=[\"']|(?!(?:tokens?|auth\w*|is|was|the|an?|not|missing|invalid|expired|required"
    r"|header|scheme|realm|of|for|with|and|or)\b)[^\s])"
)
_HEADER_LINE = re.compile(r"[ \t]*(?:[<>][ \t]*)?")  # what may stand before a header at a line's start
# A secret-named query parameter of a URL (?token=, &api_key=, X-Amz-Signature=, a Google API's ?key=).
_QUERY = re.compile(r"(?<=[?&;])([A-Za-z_][\w.\-]{0,80})=(?=[^&#\s\"'<>])")
_QUERY_END = re.compile(r"[&#\s\"'<>]")
# key = value / key: value / "key": "value" (also \"key\": inside a JSON string) for secret-like keys.
_ASSIGNMENT = re.compile(r"(?<![\w.\-\\])(\\?[\"']|)([A-Za-z_][\w.\-]{0,80})\1([ \t]*(?:=|:(?!//))[ \t]*)")
_LINE_START = re.compile(r"[ \t]*(?:-[ \t]+|export[ \t]+)?")  # what may stand before an ini/YAML key
# <password>value</password>
_XML = re.compile(r"<([A-Za-z_][\w.\-]{0,80})>([^<\n]+)</\1>")
# --flag value / --flag=value / -flag value for secret-like flag names.
_FLAG = re.compile(r"(?<![\w\-])(--?[A-Za-z][\w\-]{0,80})(?:=|[ \t]+)(?=[^\s\-])")
# -u user:pass / --user user:pass / -uuser:pass (curl, wget; -U and --proxy-user for a proxy).
_USER_FLAG = re.compile(r"(?<![\w\-])(?:-u|-U|--user|--proxy-user|--http-user)(?:=|[ \t]+|(?=[^\s\-]))")
_UID_GID = re.compile(r"[\"']?\d+:\d+[\"']?")  # docker run -u 1000:1000
_HTTP_CLIENT = re.compile(r"(?i)\b(?:curl|wget|http|https)\b")
# Tools whose -u is user:group, not user:password (unless the line runs an HTTP client too).
_USER_GROUP_TOOLS = re.compile(
    r"(?<![\w\-])(?:docker|podman|nerdctl|crictl|buildah|chown|runuser)[ \t]+(?!login\b)"
)
# -p is a password only where its line says so: a client whose -p is the password, a login, or a -u user.
_P_FLAG = re.compile(r"(?<![\w\-])-p(?:[ \t]+(?=[^\s\-])|(?=[^\s\-]))")
_P_CONTEXT = re.compile(
    r"(?<![\w\-])(?i:mysql\w*|mariadb[\w\-]*|mongo\w*|sshpass|login)(?![\w\-])"
    r"|(?<![\w\-])(?:-u|--user(?:name)?)(?:[ \t=]|(?=\w))"
)
_PORTS = re.compile(r"[\d.\[\]:]*\d+:\d+(?:/\w+)?")  # docker run -u 1000 -p 127.0.0.1:8080:80/tcp


def _headers(text: str) -> list[tuple[int, int]]:
    """Authorization headers and bearer tokens. A header that starts its line (an HTTP dump, ``curl -v``'s
    ``> Authorization: Digest username="bob", response="…"``) or is quoted whole holds its value to the end of
    the line or the quote."""
    spans = []
    for pattern in (_AUTH_HEADER, _BEARER):
        for m in pattern.finditer(text):
            if _already(text, m.end()):
                continue
            line_start = text.rfind("\n", 0, m.start()) + 1
            header_line = pattern is _AUTH_HEADER and _HEADER_LINE.fullmatch(text, line_start, m.start())
            enclosing = _enclosing(text, m.start())
            end = _value_end(text, m.end(), to_eol=bool(header_line), enclosing=enclosing, spaces=True)
            spans.append((m.end(), end))
    return spans


def _already(text: str, start: int) -> bool:
    return _ALREADY.match(text, start) is not None


def _queries(text: str) -> list[tuple[int, int]]:
    spans = []
    for m in _QUERY.finditer(text):
        name = m.group(1)
        if (is_secret_name(name) or name.lower() == "key") and not _already(text, m.end()):
            end = _QUERY_END.search(text, m.end())
            spans.append((m.end(), end.start() if end else len(text)))
    return spans


def _assignments(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    if not MAYBE_SECRET_NAME.search(text):
        return spans
    for m in _ASSIGNMENT.finditer(text):
        start = m.end()
        if not is_secret_name(m.group(2)) or _already(text, start) or start >= len(text):
            continue
        # An ini or YAML line (password = two words, password: x y): the value is the rest of the line.
        spaced = m.group(3).strip(" \t") != m.group(3)
        line_start = text.rfind("\n", 0, m.start()) + 1
        to_eol = spaced and not m.group(1) and _LINE_START.fullmatch(text, line_start, m.start()) is not None
        enclosing = "" if m.group(1) else _enclosing(text, m.start())
        end = _value_end(text, start, to_eol=to_eol, enclosing=enclosing)
        if to_eol or (not m.group(1) and ":" in m.group(3)):
            block = _yaml_block(text, line_start, m.start(), text[start:end])
            if block is not None:
                spans.append(block)
                continue
        spans.append((start, end))
    for m in _XML.finditer(text):
        if is_secret_name(m.group(1)) and not _already(text, m.start(2)):
            spans.append((m.start(2), m.end(2)))
    return spans


_BLOCK_INDICATOR = re.compile(r"[|>][-+0-9]*(?:[ \t]+#.*)?")
_MAPPING_OR_ITEM = re.compile(r"[ \t]*(?:-(?:[ \t]|$)|[\"']?[\w.\-]+[\"']?[ \t]*:(?:[ \t]|$))")


def _yaml_block(text: str, line_start: int, key_start: int, value: str) -> tuple[int, int] | None:
    """The lines a YAML key's value continues on, when it does: a block scalar (``password: |`` and its more
    indented lines), or an empty value whose next, more indented line is a scalar, not a mapping or a list
    (``token:\n  abc``; ``credentials:\n  user: bob`` stays, its fields judged one by one)."""
    block = bool(_BLOCK_INDICATOR.fullmatch(value))
    if value and not block:
        return None
    indent = key_start - line_start
    first = text.find("\n", key_start)
    if first < 0:
        return None
    pos, end = first + 1, None
    while pos <= len(text):
        nl = text.find("\n", pos)
        line = text[pos : len(text) if nl < 0 else nl]
        if line.strip():
            if len(line) - len(line.lstrip(" \t")) <= indent:
                break
            if end is None and not block and _MAPPING_OR_ITEM.match(line):
                return None
            end = pos + len(line.rstrip())
        if nl < 0:
            break
        pos = nl + 1
    if end is None:
        return None
    body = first + 1 + len(text[first + 1 : end]) - len(text[first + 1 : end].lstrip())
    return (body, end)


def _flags(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    if "-" not in text:
        return spans
    for m in _FLAG.finditer(text) if MAYBE_SECRET_NAME.search(text) else ():
        if is_secret_name(m.group(1)) and not _already(text, m.end()):
            spans.append((m.end(), _value_end(text, m.end(), enclosing=_enclosing(text, m.start()))))
    for m in _USER_FLAG.finditer(text):
        end = _value_end(text, m.end(), enclosing=_enclosing(text, m.start()))
        value = text[m.end() : end]
        colon = value.find(":")
        if colon <= 0 or _UID_GID.fullmatch(value) or _already(text, m.end() + colon + 1):
            continue
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if _USER_GROUP_TOOLS.search(line) and not _HTTP_CLIENT.search(line):
            continue  # docker run -u app:app is a user and a group
        quoted = len(value) > 1 and value[0] in _QUOTES and value[-1] == value[0]
        spans.append((m.end() + colon + 1, end - 1 if quoted else end))  # -u 'admin:[redacted]'
    for m in _P_FLAG.finditer(text) if "-p" in text else ():
        line_start = text.rfind("\n", 0, m.start()) + 1
        line_end = text.find("\n", m.end())
        line = text[line_start : len(text) if line_end < 0 else line_end]
        if not _P_CONTEXT.search(line) or _already(text, m.end()):
            continue
        end = _value_end(text, m.end(), enclosing=_enclosing(text, m.start()))
        if not _PORTS.fullmatch(text[m.end() : end]):
            spans.append((m.end(), end))
    return spans


def mask_secrets(text: str) -> str:
    """Every credential-shaped span of ``text`` masked (the free-text policy of :mod:`collectors.sources.redact`)."""
    for pattern, repl in _TEXT_PATTERNS:
        text = pattern.sub(repl, text)
    # One pass per family, each seeing the last one's masks: a value is masked once, by its first shape.
    for spans in (_headers, _queries, _assignments, _flags):
        text = _mask_spans(text, sorted(spans(text)))
    return text
