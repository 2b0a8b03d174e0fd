"""The peers suite: real third-party tools (kubectl, ...) against rcaweb's simulator and rcaweb.

A tool that is not installed skips its tests with the reason shown, except in CI
(``RCAWEB_REQUIRE_PEERS=1``, set by .ci/run), where a missing tool is a failure.
"""

from __future__ import annotations

import os
import shutil

import pytest


def require_tool(name: str, package: str) -> str:
    """The tool's path, or skip (fail under RCAWEB_REQUIRE_PEERS=1) naming the Debian package that provides it."""
    path = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
    if path:
        return path
    reason = f"{name} is not installed (Debian package {package})"
    if os.environ.get("RCAWEB_REQUIRE_PEERS") == "1":
        pytest.fail(f"{reason}, and RCAWEB_REQUIRE_PEERS=1 requires every peer tool", pytrace=False)
    pytest.skip(reason)
