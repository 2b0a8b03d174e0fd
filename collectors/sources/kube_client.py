"""The Kubernetes API client of a cluster, and one request through it: credentials loaded and bounded,
answers undecoded, every failure a :class:`SourceError`."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from collectors.sources.errors import SourceError, describe_http_error
from collectors.sources.kubeconfig import check_kubeconfig

SOURCE = "k8s"


def custom_listing(group: str, version: str, plural: str) -> str:
    """The call name of a custom resource's listing ("list podgroups.scheduling.run.ai/v2alpha2"): what
    ``KubeSource.lister`` reads back, and what a sweep names to ``KubeSource.prefetch``."""
    return f"list {plural}.{group}/{version}"


class ClusterAccess(Protocol):
    """What a source needs of a cluster: where its credentials are ("" for the in-cluster service account).
    The inventory's ``Cluster`` model is one; sources import no model."""

    kubeconfig: str


def api_client(cluster: ClusterAccess, timeout: float) -> client.ApiClient:
    cfg = client.Configuration()
    try:
        if cluster.kubeconfig:
            check_kubeconfig(cluster.kubeconfig)  # bounded first: the client reads any file whole
            config.load_kube_config(
                config_file=cluster.kubeconfig, client_configuration=cfg, persist_config=False
            )
        else:
            config.load_incluster_config(client_configuration=cfg)
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        where = cluster.kubeconfig or "in-cluster service account"
        raise SourceError(SOURCE, "configure", f"cannot load Kubernetes credentials from {where}: {exc}")
    # One quick reconnect for a dropped keep-alive connection; no read retries (a hung server would
    # otherwise cost four timeouts) — the task retries the whole sweep with backoff instead.
    cfg.retries = urllib3.Retry(total=1, connect=1, read=0, redirect=0, status=0, other=0)
    return client.ApiClient(cfg)


def request(
    api: client.ApiClient,
    timeout: float,
    call: str,
    fn: Callable[..., Any],
    *args: Any,
    read_timeout: float | None = None,
    **kw: Any,
) -> Any:
    """``fn``'s answer undecoded (``_preload_content=False``), connected within ``timeout`` (at most 5 s) and
    read within ``read_timeout`` (default ``timeout``)."""
    host = api.configuration.host
    try:
        return fn(
            *args, _preload_content=False, _request_timeout=(min(timeout, 5.0), read_timeout or timeout), **kw
        )
    except ApiException as exc:
        raise SourceError(
            SOURCE,
            call,
            describe_http_error(exc.status or 0, exc.reason or "", status_message(exc.body)),
            status=exc.status,
        )
    except urllib3.exceptions.NewConnectionError as exc:  # a ConnectTimeoutError subclass, but refused
        raise SourceError(SOURCE, call, f"cannot connect to {host}: {exc}")
    except urllib3.exceptions.TimeoutError:
        raise SourceError(SOURCE, call, f"did not answer within {timeout:g} s ({host})")
    except urllib3.exceptions.MaxRetryError as exc:
        reason = exc.reason
        if isinstance(reason, urllib3.exceptions.TimeoutError) and not isinstance(
            reason, urllib3.exceptions.NewConnectionError
        ):
            raise SourceError(SOURCE, call, f"did not answer within {timeout:g} s ({host})")
        raise SourceError(SOURCE, call, f"cannot connect to {host}: {reason}")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise SourceError(SOURCE, call, f"request failed: {exc}")


def status_message(body: Any) -> str:
    """The ``message`` of a Kubernetes Status body, else the body itself (shortened)."""
    if not body:
        return ""
    try:
        status = json.loads(body)
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
    except (TypeError, ValueError):
        pass
    return str(body)[:300]
