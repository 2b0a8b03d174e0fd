"""The Celery app. Without REDIS_URL tasks run inline (eager), for the demo and `make test`."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rcaweb.settings")

app = Celery("rcaweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
