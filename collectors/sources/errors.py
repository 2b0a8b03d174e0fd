"""The one error every source raises: which system, which call, what went wrong.

A failed call is evidence ("Prometheus did not answer at 03:12"), so the
error carries enough to be stored as a ``SourceRun`` row and shown on pages.
"""

from __future__ import annotations

from collectors.sources.redact import redact_text


class SourceError(Exception):
    """A source call failed: timeout, refused, 401/403/5xx, or an answer that is not what the API promises."""

    def __init__(self, source: str, call: str, message: str, *, status: int | None = None) -> None:
        # Redacted here, once for every source: a message names the URL it could not reach, and a URL may
        # carry credentials (http://user:pass@prom:9090) that the home page would show any signed-in user.
        call, message = redact_text(call), redact_text(message)
        super().__init__(f"{source}: {call}: {message}")
        self.source = source
        self.call = call
        self.message = message
        self.status = status

    @property
    def gone(self) -> bool:
        """410 Gone / Expired: a continue token or resourceVersion is too old; re-list."""
        return self.status == 410


def describe_http_error(status: int, reason: str, body: str = "") -> str:
    """A short, human sentence for an HTTP failure, with the server's own words where it gave some."""
    kinds = {
        401: "unauthorized (token missing, wrong or expired)",
        403: "forbidden (the service account lacks get/list on this resource)",
        404: "not found (resource or API group not served)",
        410: "gone (resourceVersion or continue token expired)",
        429: "too many requests (throttled)",
    }
    what = kinds.get(status) or (f"server error {status}" if status >= 500 else f"HTTP {status}")
    detail = (body or reason or "").strip().replace("\n", " ")
    if len(detail) > 300:
        detail = detail[:300] + "…"
    return f"{what}: {detail}" if detail else what
