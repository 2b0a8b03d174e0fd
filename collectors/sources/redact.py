"""Secrets never reach the database: env values, log lines and Secret objects are redacted first.

Names that look like credentials are matched on word parts (``WANDB_API_KEY``,
``DB_PASSWORD``, ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``), not on a fixed list,
because every team invents its own names.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

REDACTED = "[redacted]"

_SECRET_NAME = re.compile(
    r"(^|[_\-.])(PASS(WORD|WD)?|PWD|SECRET|TOKEN|API[_\-]?KEY|ACCESS[_\-]?KEY|PRIVATE[_\-]?KEY|KEY|CREDENTIALS?|AUTH|"
    r"SESSION|COOKIE|DSN|CONN(ECTION)?[_\-]?STRING)([_\-.]|$)",
    re.IGNORECASE,
)
# Words that end in KEY but are not secrets.
_NOT_SECRET = re.compile(r"(^|_)(PUBLIC_KEY|KEY_ID|KEYS_PATH|PRIMARY_KEY|SORT_KEY|CACHE_KEY)$", re.IGNORECASE)

_TEXT_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # Authorization: Bearer abc.def / "bearer abc"
    (re.compile(r"(?i)\b(bearer|token)(\s+|=|:\s*)([A-Za-z0-9\-._~+/]{8,}=*)"), r"\1\2" + REDACTED),
    # password=..., passwd: ..., secret=..., api_key=...
    (
        re.compile(
            r"(?i)\b([A-Za-z0-9_\-]*(?:password|passwd|pwd|secret|api[_\-]?key|access[_\-]?key|token))"
            r"([\"']?\s*[=:]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&]+)"
        ),
        r"\1\2" + REDACTED,
    ),
    # URLs with credentials: scheme://user:pass@host
    (re.compile(r"([a-zA-Z][a-zA-Z0-9+.\-]*://[^\s:/@]+:)([^\s@/]+)(@)"), r"\1" + REDACTED + r"\3"),
    # Well-known token shapes even without a name: GitHub, Slack, AWS access key ids, JWTs, W&B keys.
    (re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{20,}|xox[abpr]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16})\b"), REDACTED),
    (re.compile(r"\beyJ[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}\.[A-Za-z0-9_\-]{5,}"), REDACTED),
    (re.compile(r"\bwandb_v1_[A-Za-z0-9]{16,}\b"), REDACTED),
]


@lru_cache(maxsize=4096)  # 20,000 pods share a few hundred env names
def is_secret_name(name: str) -> bool:
    """True when an environment variable's name says it holds a credential."""
    if _NOT_SECRET.search(name):
        return False
    return bool(_SECRET_NAME.search(name))


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
    """Mask bearer tokens, ``password=``-style assignments, credentials in URLs and well-known token shapes."""
    if not text:
        return text
    if len(text) <= 512:  # env values and container args repeat across a job's pods: remember short ones
        return _redact_short(text)
    return _redact(text)


@lru_cache(maxsize=8192)
def _redact_short(text: str) -> str:
    return _redact(text)


def _redact(text: str) -> str:
    for pattern, repl in _TEXT_PATTERNS:
        text = pattern.sub(repl, text)
    return text


def is_secret_object(obj: dict[str, Any]) -> bool:
    """Kubernetes Secret objects are never stored, whatever asked for them."""
    if obj.get("kind") == "Secret":
        return True
    # List items come without "kind": a Secret is the object with data/stringData and a Secret type.
    kind_type = str(obj.get("type") or "")
    return ("data" in obj or "stringData" in obj) and (
        kind_type == "Opaque" or kind_type.startswith("kubernetes.io/")
    )
