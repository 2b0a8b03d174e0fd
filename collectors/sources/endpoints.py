"""The URLs of a cluster's sources (``--prometheus``, ``--runai`` of ``manage.py cluster add``), checked before
anything is stored, and shown without their credentials.

An admin's typo must be a one-line error naming the option, not a traceback (``http://[::1``), nor a URL
accepted that no request can use (port 99999, a host ``prom%00``). Credentials in a URL
(``http://user:pass@prom:9090``) are refused: stored in the cluster's row they were shown by ``cluster list``
and in source errors. They go in the settings each refusal names instead, read from the environment or a
secret file (``RCAWEB_PROMETHEUS_USERNAME``/``_PASSWORD``, ``RCAWEB_RUNAI_TOKEN``).
"""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

MAX_URL = 200  # Cluster.prometheus_url and runai_url are URLFields: varchar(200) on PostgreSQL

# Where each option's credentials go instead of the URL.
CREDENTIALS = {
    "--prometheus": "set RCAWEB_PROMETHEUS_USERNAME and RCAWEB_PROMETHEUS_PASSWORD (or their _FILE variants)",
    "--runai": "set RCAWEB_RUNAI_TOKEN (or RCAWEB_RUNAI_TOKEN_FILE)",
}

# One DNS label (RFC 1123, with the underscores of Docker service names); a host is one or more, dot-separated.
_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*\.?$")
_USERINFO = re.compile(r"(?<=//)[^/?#@]*@")


class EndpointError(ValueError):
    """A source URL refused; the message is one line and names the option, never the URL's credentials."""


def shown_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``***@``: what a message or a listing may show."""
    return _USERINFO.sub("***@", url)


def check_url(option: str, url: str) -> str:
    """``url`` if a request can use it as a source's base URL, else :class:`EndpointError` naming ``option``."""
    what = f"{option} {shown_url(url)[:MAX_URL]!r}"
    if len(url) > MAX_URL:
        raise EndpointError(f"{what}: longer than {MAX_URL} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url) or re.search(
        r"%(?:[01][0-9A-Fa-f]|7[Ff])", url
    ):
        raise EndpointError(f"{what}: contains a control character, a space or a NUL byte")
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError past 65535 or when not a number
        host = parts.hostname
    except ValueError as exc:
        raise EndpointError(f"{what}: not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not host:
        raise EndpointError(f"{what}: not an http(s) URL (like http://prometheus.monitoring:9090)")
    if parts.username is not None or parts.password is not None:
        raise EndpointError(
            f"{what}: credentials in the URL are not accepted (they would be stored and shown); "
            f"{CREDENTIALS.get(option, 'configure them in the settings')} instead"
        )
    if port == 0:
        raise EndpointError(f"{what}: port 0 is not a port a server listens on")
    if not _valid_host(host):
        raise EndpointError(f"{what}: {host[:60]!r} is not a host name or an IP address")
    if parts.query or parts.fragment:
        raise EndpointError(f"{what}: a base URL has no ?query or #fragment (rcaweb appends the API's paths)")
    return url


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return len(host) <= 253 and bool(_HOSTNAME.match(host))
