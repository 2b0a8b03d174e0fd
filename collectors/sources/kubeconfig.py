"""Reading a kubeconfig within bounds, before the kubernetes client does (``cluster add``, ``cluster check`` and
every sweep, through ``collectors.sources.kubernetes``).

The kubernetes client reads a kubeconfig whole with ``yaml.safe_load``: a 300 MB file was accepted, and a
700-byte file of nested YAML aliases (a "billion laughs") ran until the process ran out of memory.
A kubeconfig is a few kilobytes and kubectl writes no aliases, so :func:`check_kubeconfig` refuses a file
larger than :data:`MAX_KUBECONFIG_BYTES`, anything but a regular file, and any YAML alias, with a one-line
reason. It raises :class:`KubeconfigError`, a ``ValueError``, which both callers already report as a bad
kubeconfig.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import yaml

MAX_KUBECONFIG_BYTES = (
    1024 * 1024
)  # kubeconfigs with inline certificates for a dozen clusters stay under 100 KiB


class KubeconfigError(ValueError):
    """A kubeconfig refused before parsing it further; the message is one line."""


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases (``*name``) where it would expand them: an alias is how a few
    bytes of YAML become gigabytes of objects."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise KubeconfigError(
                f"YAML aliases (*{self.peek_event().anchor}) are not accepted in a kubeconfig "
                f"(line {mark.line + 1}; kubectl writes none)"
            )
        return super().compose_node(parent, index)


def check_kubeconfig(path: str) -> dict[str, Any]:
    """The kubeconfig at ``path`` as a dict, or :class:`KubeconfigError` naming why it is refused."""
    try:
        info = os.stat(path)  # before opening: opening a FIFO would wait for a writer
        if not stat.S_ISREG(info.st_mode):
            raise KubeconfigError("not a regular file")
        if info.st_size > MAX_KUBECONFIG_BYTES:
            raise KubeconfigError(
                f"{info.st_size} bytes: a kubeconfig is at most {MAX_KUBECONFIG_BYTES} bytes"
            )
        with open(path, "rb") as f:
            data = f.read(MAX_KUBECONFIG_BYTES + 1)  # a file that grew since is bounded too
    except OSError as exc:
        raise KubeconfigError(f"cannot read it: {exc.strerror or exc}") from exc
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise KubeconfigError(f"larger than {MAX_KUBECONFIG_BYTES} bytes: a kubeconfig is a few kilobytes")
    try:
        parsed = yaml.load(data, Loader=_NoAliasLoader)  # a SafeLoader: no Python objects either
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"not YAML: {' '.join(str(exc).split())[:300]}") from exc
    except RecursionError:
        raise KubeconfigError("YAML nested too deeply for a kubeconfig") from None
    if not isinstance(parsed, dict):
        raise KubeconfigError(
            f"expected a YAML mapping (apiVersion, clusters, contexts, users), got {type(parsed).__name__}"
        )
    return parsed
