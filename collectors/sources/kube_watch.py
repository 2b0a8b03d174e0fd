"""One Kubernetes watch: a stream of events from a resourceVersion, the objects as the server sent them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from collectors.sources.errors import SourceError, describe_http_error
from collectors.sources.kube_client import SOURCE, status_message
from collectors.sources.redact import is_secret_object


class RawWatch(watch.Watch):
    """The client's Watch, handing over the server's JSON (``raw_object``) without model deserialization.

    Deserializing into generated classes costs far more than the mapping and is thrown away; the mappers
    read the same dicts a list returns.
    """

    def get_return_type(self, func: Any) -> Any:
        return None


def watch_events(
    api: client.ApiClient,
    timeout: float,
    stream: RawWatch,
    call: str,
    fn: Callable[..., Any],
    resource_version: str,
    timeout_s: int,
    *args: Any,
) -> Iterator[dict[str, Any]]:
    """Watch events ({"type", "object"}) of ``fn`` through ``stream`` (see ``KubeSource.watch``); ``timeout``
    bounds connecting (at most 5 s) and, beyond ``timeout_s``, reading."""
    host = api.configuration.host
    kw = {
        "resource_version": resource_version,
        "timeout_seconds": int(timeout_s),
        "allow_watch_bookmarks": True,
        "_request_timeout": (min(timeout, 5.0), timeout_s + timeout),
    }
    try:
        for event in stream.stream(fn, *args, **kw):
            if not isinstance(event, dict) or "type" not in event:
                raise SourceError(SOURCE, call, "malformed watch event: no type")
            obj = event.get("raw_object")
            if not isinstance(obj, dict):
                raise SourceError(SOURCE, call, "malformed watch event: the object is not an object")
            if event["type"] != "BOOKMARK" and is_secret_object(obj):
                continue
            yield {"type": event["type"], "object": obj}
    except ApiException as exc:
        raise SourceError(
            SOURCE,
            call,
            describe_http_error(exc.status or 0, exc.reason or "", status_message(exc.body))
            if exc.body
            else str(exc.reason or "watch error"),
            status=exc.status,
        )
    except (ValueError, KeyError, TypeError) as exc:  # a line that is not a watch event
        raise SourceError(SOURCE, call, f"malformed watch event: {exc}")
    except urllib3.exceptions.NewConnectionError as exc:
        raise SourceError(SOURCE, call, f"cannot connect to {host}: {exc}")
    except urllib3.exceptions.MaxRetryError as exc:
        raise SourceError(SOURCE, call, f"cannot connect to {host}: {exc.reason}")
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if stream._stop:
            return  # stop() shut the socket: a requested end, not a failure
        raise SourceError(SOURCE, call, f"watch stream broke: {exc}")
