"""Login throttling state, in the database so every gunicorn worker and host sees the same counts."""

from __future__ import annotations

from django.db import models


class LoginThrottle(models.Model):
    """Failed logins for one key (``user:<hash>`` or ``ip:<address>``), or a known-good ``good:<hash>:<address>``.

    ``next_allowed`` is when the next attempt under this key is heard again: a progressive delay, never a
    lock, so an attacker's guesses slow the attacker without locking the real user out.
    """

    key = models.CharField(max_length=200, unique=True)  # rcaweb.throttle looks rows up by key only
    failures = models.PositiveIntegerField(default=0)
    last_seen = models.DateTimeField(db_index=True)  # pruning deletes rows by age
    next_allowed = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key}: {self.failures} failures"
