"""Which names are a credential's (``WANDB_API_KEY``, ``DB_PASSWORD``, ``clientSecret``) and which are only about
one (``PASSWORD_FILE``, ``secretName``, ``token_count``): the name half of the redaction policy
(:mod:`collectors.sources.redact`)."""

from __future__ import annotations

import re
from functools import lru_cache

# A name part (split on _ - . and camelCase) that is a credential by itself.
_SECRET_PARTS = frozenset(
    {
        "pass", "password", "passwd", "passphrase", "pwd", "pat", "secret", "secrets", "token",
        "apikey", "credential", "credentials", "creds", "auth", "authorization", "cookie", "dsn",
        "jwt", "bearer", "sig", "signature", "sas", "privatekey", "accesskey", "secretkey",
    }
)  # fmt: skip
# Substrings distinctive enough to mean a credential wherever they appear in a name (CLIENTSECRET, DBPASSWORD).
_SECRET_SUBSTRINGS = ("password", "passwd", "passphrase", "secret", "credential", "apikey", "accesskey",
                      "privatekey", "authorization", "authtoken", "accesstoken", "webhookurl")  # fmt: skip
# Words that contain a secret-looking part but are not secrets.
_NOT_SECRET = re.compile(r"(^|[_\-.])TOKENIZERS?([_\-].*)?$", re.IGNORECASE)
# A last part that makes a name *about* a credential, not the credential: where it is read from, what it is
# called, how long it lives, how many there are, or an exception class (KeyError, TokenExpiredError).
_ABOUT_PARTS = frozenset(
    {
        "file", "path", "dir", "stdin", "name", "names", "ref", "id", "ids", "type", "ttl", "length", "len",
        "expiry", "count", "size", "policy", "mode", "enabled", "required", "error", "exception", "warning",
        "exceeded", "expired", "invalid", "missing",
    }
)  # fmt: skip
# "key" is a credential only when qualified (api_key, private_key, sshKey), never alone (KeyError, a taint's
# key), nor with these qualifiers (a database's or a cache's key).
_NOT_KEY_QUALIFIERS = frozenset(
    {
        "public", "primary", "sort", "cache", "dedup", "group", "partition", "foreign", "label", "node",
        "taint", "lookup", "hash", "range", "row", "map", "dict", "object", "idempotency", "unique",
        "composite", "shard", "sharding", "routing", "index", "cluster", "metric", "series", "the", "a",
    }
)  # fmt: skip
# Every secret name holds one of these (the parts and substrings above): a text without any has no
# secret-named key or flag, and the scans for them are skipped (most log lines).
MAYBE_SECRET_NAME = re.compile(r"(?i)pass|pwd|pat|secret|token|key|cred|auth|cookie|dsn|jwt|bearer|sig|sas")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_PARTS = re.compile(r"[^A-Za-z0-9]+")


@lru_cache(maxsize=4096)  # 20,000 pods share a few hundred env names
def is_secret_name(name: str) -> bool:
    """True when an environment variable's, flag's or field's name says it holds a credential."""
    name = name.strip().lstrip("-")
    if not name or _NOT_SECRET.search(name):
        return False
    parts = [p.lower() for p in _PARTS.split(_CAMEL.sub("_", name)) if p]
    if not parts or (len(parts) > 1 and parts[-1] in _ABOUT_PARTS):
        return False
    if any(p in _SECRET_PARTS or p.endswith("token") for p in parts):
        return True
    if len(parts) > 1 and parts[-1] in ("key", "keys") and parts[-2] not in _NOT_KEY_QUALIFIERS:
        return True
    flat = "".join(parts)
    return any(s in flat for s in _SECRET_SUBSTRINGS)
