"""Secrets never reach the database or a page: env values, log lines, messages and Secret objects are redacted.

One module, applied where text enters storage (collectors' mapping and log reads, event messages,
alert intake, evidence observations, hypotheses) and again where it leaves (the JSON API, the Markdown
export), so rows stored before a pattern existed do not leak either.

Names that look like credentials are matched on word parts and distinctive substrings (``WANDB_API_KEY``,
``DB_PASSWORD``, ``CLIENTSECRET``, ``GITHUB_PAT``, ``clientSecret``), not on a fixed list, because every team
invents its own names. Free text is masked by shape: ``Authorization:`` headers (Bearer/Basic/any scheme,
any length), ``key = value`` and ``--flag value`` for secret-like keys, URLs with credentials or webhook
tokens, cloud and SaaS key formats, JWTs and PEM private key blocks.
"""

from __future__ import annotations

import base64
import binascii
import re
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

# A name part (split on _ - . and camelCase) that is a credential by itself.
_SECRET_PARTS = frozenset(
    {
        "pass", "password", "passwd", "passphrase", "pwd", "pat", "secret", "secrets", "token", "tokens",
        "key", "apikey", "credential", "credentials", "creds", "auth", "authorization", "cookie", "dsn",
        "jwt", "bearer", "sig", "signature", "sas", "privatekey", "accesskey", "secretkey",
    }
)  # fmt: skip
# Substrings distinctive enough to mean a credential wherever they appear in a name (CLIENTSECRET, DBPASSWORD).
_SECRET_SUBSTRINGS = ("password", "passwd", "passphrase", "secret", "credential", "apikey", "accesskey",
                      "privatekey", "authorization", "authtoken", "accesstoken", "webhookurl")  # fmt: skip
# Words that contain a secret-looking part but are not secrets.
_NOT_SECRET = re.compile(
    r"(^|[_\-.])(PUBLIC[_\-]?KEY|KEY[_\-]?ID|KEYS?[_\-]?PATH|KEY[_\-]?FILE[_\-]?PATH|PRIMARY[_\-]?KEY|SORT[_\-]?KEY|"
    r"CACHE[_\-]?KEY|DEDUP[_\-]?KEY|GROUP[_\-]?KEY|TOKENIZERS?([_\-].*)?)$",
    re.IGNORECASE,
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARTS = re.compile(r"[^A-Za-z0-9]+")


@lru_cache(maxsize=4096)  # 20,000 pods share a few hundred env names
def is_secret_name(name: str) -> bool:
    """True when an environment variable's, flag's or field's name says it holds a credential."""
    name = name.strip().lstrip("-")
    if not name or _NOT_SECRET.search(name):
        return False
    parts = [p.lower() for p in _PARTS.split(_CAMEL.sub("_", name)) if p]
    if any(p in _SECRET_PARTS or p.endswith("token") for p in parts):
        return True
    flat = "".join(parts)
    return any(s in flat for s in _SECRET_SUBSTRINGS)


def _basic(m: re.Match[str]) -> str:
    """``Basic <base64>`` outside a header: masked only when it decodes to ``user:password``."""
    try:
        decoded = base64.b64decode(m.group(2), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return m.group(0)
    return m.group(1) + REDACTED if ":" in decoded else m.group(0)


_AUTH_SCHEMES = r"(?:bearer|basic|token|digest|negotiate|ntlm|apikey|sso-key|aws4-hmac-sha256|hmac|dpop)"
_VALUE = r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s,;&\"'<>]+)"

_TEXT_PATTERNS: list[tuple[re.Pattern[str], Any]] = [
    # PEM private key blocks (a truncated block is masked to the end of the text).
    (
        re.compile(
            r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----.*?(?:-----END \1PRIVATE KEY-----|\Z)", re.DOTALL
        ),
        lambda m: f"-----BEGIN {m.group(1)}PRIVATE KEY-----{REDACTED}-----END {m.group(1)}PRIVATE KEY-----",
    ),
    # Authorization / Proxy-Authorization headers: the whole credential, whatever the scheme or length.
    (
        re.compile(
            rf"(?i)(\b(?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?(?:{_AUTH_SCHEMES}\s+)?)(?!\[redacted\])[^\s\"'\\,;]+"
        ),
        r"\1" + REDACTED,
    ),
    # "Bearer <token>" anywhere (curl -H, error messages), any length.
    (re.compile(r"(?i)(\bbearer\s+)(?!\[redacted\])[^\s\"'\\,;]+"), r"\1" + REDACTED),
    (re.compile(r"(?i)(\bbasic\s+)([A-Za-z0-9+/]{4,}={0,2})(?![A-Za-z0-9+/=])"), _basic),
    # Webhook URLs whose path is the credential: Slack, Discord, Microsoft Teams/Power Automate, Mattermost.
    (
        re.compile(
            r"(?i)\b(https?://(?:hooks\.slack\.com/(?:services|workflows|triggers)|(?:[\w-]+\.)?discord(?:app)?\.com/api/webhooks"
            r"|[\w.-]+\.webhook\.office\.com/webhookb2|[\w.-]+/hooks)/)[^\s\"'<>]+"
        ),
        r"\1" + REDACTED,
    ),
    # URLs with credentials: scheme://user:pass@host, and scheme://<long token>@host.
    (re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@\"'<>]*:)([^\s@/\"'<>]+)(@)"), r"\1" + REDACTED + r"\3"),
    (re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://)([A-Za-z0-9_\-]{20,})(@)"), r"\1" + REDACTED + r"\3"),
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
# key = value / key: value / "key": "value" for secret-like keys; --flag value / --flag=value / -p value.
_ASSIGNMENT = re.compile(r"(?<![\w.\-])([\"']?)([A-Za-z_][\w.\-]{0,80})\1(\s*[=:]\s*)" + _VALUE)
_FLAG = re.compile(r"(?<![\w\-])(--?[A-Za-z][\w\-]{0,80})(=|[ \t]+)" + _VALUE)


def _assignment(m: re.Match[str]) -> str:
    key, value = m.group(2), m.group(4)
    if (
        not is_secret_name(key)
        or value.strip("\"'") == REDACTED
        or m.string.startswith(f" {REDACTED}", m.end())
    ):
        return m.group(0)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{m.group(1)}{key}{m.group(1)}{m.group(3)}{quote}{REDACTED}{quote}"


def _flag(m: re.Match[str]) -> str:
    flag, value = m.group(1), m.group(3)
    if not is_secret_name(flag) or value.startswith("-") or value.strip("\"'") == REDACTED:
        return m.group(0)
    quote = value[0] if value[:1] in ("'", '"') else ""
    return f"{flag}{m.group(2)}{quote}{REDACTED}{quote}"


def redact_env(env: dict[str, Any]) -> dict[str, Any]:
    """Copy of ``env`` with the values of secret-looking names replaced by ``[redacted]``; other values pass
    through :func:`redact_text` (a URL with a password in a harmless-looking name is still masked)."""
    out: dict[str, Any] = {}
    for name, value in env.items():
        if is_secret_name(str(name)):
            out[name] = REDACTED
        elif isinstance(value, str):
            out[name] = redact_text(value)
        else:
            out[name] = value
    return out


def redact_container_env(env_list: list[dict[str, Any]] | None) -> dict[str, Any]:
    """A pod spec's ``env`` list → ``{name: value}`` redacted. ``valueFrom`` references name where the value
    comes from (a Secret key reference is safe to show: it holds no value)."""
    env: dict[str, Any] = {}
    for item in env_list or []:
        name = item.get("name")
        if not name:
            continue
        if "value" in item:
            env[name] = item.get("value")
        elif item.get("valueFrom"):
            ref = item["valueFrom"]
            if "secretKeyRef" in ref:
                env[name] = (
                    f"(from secret {ref['secretKeyRef'].get('name', '?')}/{ref['secretKeyRef'].get('key', '?')})"
                )
            elif "configMapKeyRef" in ref:
                cm = ref["configMapKeyRef"]
                env[name] = f"(from configmap {cm.get('name', '?')}/{cm.get('key', '?')})"
            elif "fieldRef" in ref:
                env[name] = f"(from field {ref['fieldRef'].get('fieldPath', '?')})"
            else:
                env[name] = "(from reference)"
        else:
            env[name] = ""
    out: dict[str, Any] = {}
    for name, value in env.items():
        if isinstance(value, str) and value.startswith("(from "):
            out[name] = value
        elif is_secret_name(str(name)):
            out[name] = REDACTED
        else:
            out[name] = redact_text(value) if isinstance(value, str) else value
    return out


def redact_text(text: str) -> str:
    """Mask credentials in free text: headers, assignments, flags, URLs, key shapes, JWTs, PEM blocks."""
    if not text or not isinstance(text, str):
        return text
    if len(text) <= 512:  # env values, messages and label values repeat across pods and alerts: remember them
        return _redact_short(text)
    return _redact(text)


@lru_cache(maxsize=16384)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    for pattern, repl in _TEXT_PATTERNS:
        text = pattern.sub(repl, text)
    text = _ASSIGNMENT.sub(_assignment, text)
    return _FLAG.sub(_flag, text)


# Field names of structured data that look secret but name a non-secret (a taint's or a label selector's key).
_STRUCTURED_NOT_SECRET = frozenset({"key", "keys", "token_type", "auth_type"})


def redact_value(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings) with every string redacted and the values of secret-named
    fields masked; the same shape back, so stored content and API answers keep their structure."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            name = str(k)
            if (
                isinstance(v, str | int | float)
                and not isinstance(v, bool)
                and v != ""
                and name.lower() not in _STRUCTURED_NOT_SECRET
                and is_secret_name(name)
            ):
                out[k] = REDACTED
            else:
                out[k] = redact_value(v)
        return out
    if isinstance(value, list):
        return _redact_list(value)
    if isinstance(value, tuple):
        return tuple(redact_value(v) for v in value)
    return value


_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")


def _redact_list(items: list[Any]) -> list[Any]:
    """Each item redacted; in an argv-style list (a container's ``args``) the item after a secret flag too."""
    out = [redact_value(v) for v in items]
    # A PEM block split over items (log lines): every line between its BEGIN and END lines is key material.
    inside = False
    for i, v in enumerate(items):  # the items as given: redact_text closes a lone BEGIN line itself
        if not isinstance(v, str):
            continue
        if _PEM_BEGIN.search(v) and not _PEM_END.search(v):
            inside = True
        elif inside:
            if _PEM_END.search(v):
                inside = False
            else:
                out[i] = REDACTED
    for i in range(len(out) - 1):
        flag = out[i]
        if (
            isinstance(flag, str)
            and flag.startswith("-")
            and "=" not in flag
            and " " not in flag
            and is_secret_name(flag)
            and isinstance(out[i + 1], str)
            and not out[i + 1].startswith("-")
        ):
            out[i + 1] = REDACTED
    return out


def is_secret_object(obj: dict[str, Any]) -> bool:
    """Kubernetes Secret objects are never stored, whatever asked for them."""
    if obj.get("kind") == "Secret":
        return True
    # List items come without "kind": a Secret is the object with data/stringData and a Secret type.
    kind_type = str(obj.get("type") or "")
    return ("data" in obj or "stringData" in obj) and (
        kind_type == "Opaque" or kind_type.startswith("kubernetes.io/")
    )
