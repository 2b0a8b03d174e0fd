"""The Celery app. Without REDIS_URL tasks run inline (eager), for the demo and `make test`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")

app = Celery("rcaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

from rcaweb import taskstats  # noqa: E402,F401  (connects the task-latency signals: /metrics)


@app.on_after_finalize.connect
def _wire_beat_schedule(sender: Celery, **kwargs: object) -> None:
    """Each app's ``tasks.beat_schedule()`` (collectors: sweeps per configured cluster; incidents: outbox)."""
    from importlib import import_module

    for module in ("collectors.tasks", "incidents.tasks"):
        try:
            schedule = getattr(import_module(module), "beat_schedule", None)
            if schedule is not None:
                sender.conf.beat_schedule.update(schedule())
        except Exception:  # never stop a worker from starting over a schedule
            import logging

            logging.getLogger(__name__).exception("beat schedule of %s not wired", module)
