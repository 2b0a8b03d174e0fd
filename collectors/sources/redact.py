"""Secrets never reach the database or a page: env values, log lines, messages and Secret objects are redacted.

One policy in one module, applied where text enters storage (collectors' mapping and log reads, event
messages, source errors, alert intake, external changes, evidence observations, hypotheses) and again where
it leaves (the JSON API, the home page's source errors, the Markdown export), so rows stored before a
pattern existed do not leak either.

Names that look like credentials are matched on word parts and distinctive substrings (``WANDB_API_KEY``,
``DB_PASSWORD``, ``CLIENTSECRET``, ``GITHUB_PAT``, ``clientSecret``), not on a fixed list, because every team
invents its own names. A bare ``key`` is not one (``KeyError: 'DB_HOST'``, a taint's key); ``api_key`` and
``private_key`` are. Names *about* a credential (``PASSWORD_FILE``, ``secretName``, ``token_count``) are not.

Free text is masked by shape: ``Authorization:`` headers and bearer tokens (quoted or not), URLs with
credentials (userinfo, secret-named query parameters, webhook paths), CLI password flags (``--password``,
``-p`` after ``mysql``/``login``/``-u``, ``-u user:pass``), ``key = value``, ``key: value`` and
``"key": "value"`` for secret-like keys (JSON, YAML, ini, env, logfmt, XML), cloud and SaaS key formats,
JWTs and PEM private key blocks. A value is masked whole, whatever characters it holds: a quoted one up to
its closing quote, an unquoted one to the end of its word (of its line, for an ini or YAML line
``password = two words``). The policy in words: docs/collectors.md#redaction; its corpus of shapes and
near-misses: tests/collectors/test_redaction_corpus.py. The names live in :mod:`collectors.sources.secret_names`,
the free-text shapes in :mod:`collectors.sources.secret_shapes`; this module applies them to values.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from collectors.sources.secret_names import is_secret_name
from collectors.sources.secret_shapes import REDACTED, mask_secrets

__all__ = [
    "REDACTED",
    "is_secret_name",
    "is_secret_object",
    "redact_container_env",
    "redact_env",
    "redact_text",
    "redact_value",
]


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
    return mask_secrets(text)


@lru_cache(maxsize=16384)
def _redact_short(text: str) -> str:
    return mask_secrets(text)


# Field names of structured data that look secret but name a non-secret (a taint's or a label selector's key).
_STRUCTURED_NOT_SECRET = frozenset({"key", "keys", "token_type", "auth_type"})
# A field that names another (an env var {"name", "value"}, a change {"field", "old", "new"}), and the fields
# that then hold the named one's value.
_NAMING_FIELDS = ("name", "field", "key", "path", "param", "parameter", "variable")
_VALUE_FIELDS = frozenset({"value", "values", "old", "new", "before", "after", "from", "to", "default"})


def redact_value(value: Any) -> Any:
    """``value`` (JSON-shaped: dicts, lists, strings) with every string redacted and the values of secret-named
    fields masked, at any depth: ``{"password": …}``, a list under ``"tokens"``, and the ``value`` of
    ``{"name": "DB_PASSWORD", "value": …}`` (or ``old``/``new`` of ``{"field": "password", …}``). The same shape
    comes back, so stored content and API answers keep their structure."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        names_secret = any(
            isinstance(value.get(f), str) and is_secret_name(value[f]) for f in _NAMING_FIELDS if f in value
        )
        out: dict[Any, Any] = {}
        for k, v in value.items():
            name = str(k)
            if names_secret and name.lower() in _VALUE_FIELDS:
                out[k] = _mask_scalars(v, deep=True)
            elif name.lower() not in _STRUCTURED_NOT_SECRET and is_secret_name(name):
                out[k] = _mask_scalars(v)
            else:
                out[k] = redact_value(v)
        return out
    if isinstance(value, list):
        return _redact_list(value)
    if isinstance(value, tuple):
        return tuple(redact_value(v) for v in value)
    return value


def _mask_scalars(value: Any, *, deep: bool = False) -> Any:
    """The value of a secret-named field: strings and numbers masked (in lists too), an empty string, a boolean
    or null kept (they say whether one is set, not what it is). A dict is redacted field by field (the names
    of ``imagePullSecrets`` entries stay readable), or masked throughout (``deep``: the value of a field that
    another one names, ``{"field": "password", "new": {"value": …}}``)."""
    if isinstance(value, bool) or value is None or value == "":
        return value
    if isinstance(value, str | int | float):
        return REDACTED
    if isinstance(value, list | tuple):
        return [_mask_scalars(v, deep=deep) for v in value]
    if deep and isinstance(value, dict):
        return {k: _mask_scalars(v, deep=True) for k, v in value.items()}
    return redact_value(value)


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
