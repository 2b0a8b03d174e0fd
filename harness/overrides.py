"""Settings of this process set for a block (the webhook's token for one run), then put back."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from django.conf import settings


@contextlib.contextmanager
def settings_set(**values: Any) -> Iterator[None]:
    """Settings of this process set for the block, then put back (the webhook's token for one run)."""
    missing = object()
    saved = {name: getattr(settings, name, missing) for name in values}
    for name, value in values.items():
        setattr(settings, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is missing:
                delattr(settings, name)
            else:
                setattr(settings, name, value)
