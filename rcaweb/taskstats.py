"""Task latencies for /metrics: how long each Celery task waited in the queue and how long it ran.

The publisher stamps every message with the time it was sent (header ``rcaweb_sent_at``); the worker that
runs it adds the wait (start - sent) and the run time to per-task histograms in Redis
(``rcaweb:taskstats:<task>``), so the figures are the sum over every worker on every machine and survive
restarts. Without REDIS_URL (eager: demo, tests) nothing is recorded: tasks run inline, nothing waits.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from celery.signals import before_task_publish, task_postrun, task_prerun
from django.conf import settings

logger = logging.getLogger(__name__)

HEADER = "rcaweb_sent_at"
KEY = "rcaweb:taskstats:"
BUCKETS = (0.1, 0.5, 1.0, 5.0, 30.0, 120.0, 600.0, 3600.0)  # seconds (le); +Inf is the count
_started: dict[str, tuple[float, float | None]] = {}  # task id -> (start, sent)


def _redis() -> Any:
    if not settings.REDIS_URL:
        return None
    import redis

    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=1, socket_connect_timeout=1)


@before_task_publish.connect
def _stamp(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    if headers is not None:
        headers.setdefault(HEADER, time.time())


def _sent_at(task: Any) -> float | None:
    request = getattr(task, "request", None)
    value = getattr(request, HEADER, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(HEADER)
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


@task_prerun.connect
def _prerun(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    if task_id and not getattr(getattr(task, "request", None), "is_eager", False):
        _started[task_id] = (time.time(), _sent_at(task))


@task_postrun.connect
def _postrun(task_id: str | None = None, task: Any = None, **kwargs: Any) -> None:
    begun = _started.pop(task_id or "", None)
    if begun is None or task is None:
        return
    start, sent = begun
    record(task.name, wait_s=(start - sent) if sent is not None else None, run_s=time.time() - start)


def record(name: str, *, wait_s: float | None, run_s: float) -> None:
    """Add one run of task ``name`` to its histograms (a Redis failure loses the sample, never the task)."""
    client = _redis()
    if client is None:
        return
    import redis

    try:
        pipe = client.pipeline(transaction=False)
        key = KEY + name
        for what, value in (("wait", wait_s), ("run", run_s)):
            if value is None:
                continue
            value = max(0.0, value)
            pipe.hincrby(key, f"{what}_count", 1)
            pipe.hincrbyfloat(key, f"{what}_sum", value)
            for le in BUCKETS:
                if value <= le:
                    pipe.hincrby(key, f"{what}_le_{le:g}", 1)
        pipe.execute()
    except redis.RedisError as exc:
        logger.warning("task latency of %s not recorded: %s", name, exc)


def snapshot() -> dict[str, dict[str, float]]:
    """task name -> its histogram fields (``wait_count``, ``run_sum``, ``run_le_5`` …); {} without Redis."""
    client = _redis()
    if client is None:
        return {}
    import redis

    try:
        keys = sorted(k.decode() for k in client.scan_iter(match=KEY + "*", count=100))
        out = {}
        for key in keys:
            out[key[len(KEY) :]] = {k.decode(): float(v) for k, v in client.hgetall(key).items()}
        return out
    except redis.RedisError:
        return {}


def histogram_lines(metric: str, what: str, stats: dict[str, dict[str, float]]) -> list[str]:
    """Prometheus histogram samples of ``what`` (wait | run) for every task."""
    lines = []
    for task, fields in stats.items():
        count = fields.get(f"{what}_count", 0.0)
        if not count:
            continue
        name = task.replace("\\", "\\\\").replace('"', '\\"')
        for le in BUCKETS:
            lines.append(
                f'{metric}_bucket{{le="{le:g}",task="{name}"}} {fields.get(f"{what}_le_{le:g}", 0.0):g}'
            )
        lines.append(f'{metric}_bucket{{le="+Inf",task="{name}"}} {count:g}')
        lines.append(f'{metric}_sum{{task="{name}"}} {round(fields.get(f"{what}_sum", 0.0), 3)}')
        lines.append(f'{metric}_count{{task="{name}"}} {count:g}')
    return lines
