"""The cycle collector's settings (rcaweb/gc_policy.py): parsed from the environment, applied at startup."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from rcaweb import gc_policy


def test_unset_or_blank_is_the_default():
    assert gc_policy.thresholds("") == gc_policy.THRESHOLDS
    assert gc_policy.thresholds("  ") == gc_policy.THRESHOLDS


def test_off_leaves_the_collector_alone(monkeypatch):
    monkeypatch.setenv(gc_policy.ENV, "OFF")
    before = gc.get_threshold()
    assert gc_policy.thresholds() is None
    assert gc_policy.tune(freeze=False) is None
    assert gc.get_threshold() == before


def test_three_integers_are_taken():
    assert gc_policy.thresholds("700,10,10") == (700, 10, 10)
    assert gc_policy.thresholds(" 1000, 5 ,50") == (1000, 5, 50)


@pytest.mark.parametrize("raw", ["fast", "700,10", "700,10,10,10", "0,10,10", "-1,2,3", "1.5,2,3", "a,b,c"])
def test_anything_else_names_the_variable(raw):
    with pytest.raises(ValueError, match=gc_policy.ENV):
        gc_policy.thresholds(raw)


def test_tune_sets_the_thresholds_and_freezes(monkeypatch):
    before = gc.get_threshold()
    monkeypatch.setenv(gc_policy.ENV, "12345,7,8")
    try:
        gc.unfreeze()
        assert gc_policy.tune() == (12345, 7, 8)
        assert gc.get_threshold() == (12345, 7, 8)
        assert gc.get_freeze_count() > 0
    finally:
        gc.set_threshold(*before)


def _startup(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import django, gc; django.setup(); print(gc.get_threshold(), gc.get_freeze_count() > 0)"
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "DJANGO_SETTINGS_MODULE": "rcaweb.settings", "RCAWEB_DEBUG": "true"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_django_startup_applies_it(monkeypatch):
    import os

    base = {k: v for k, v in os.environ.items() if k != gc_policy.ENV}
    done = _startup(base)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["(50000,", "20,", "100)", "True"]
    bad = _startup({**base, gc_policy.ENV: "lots"})
    assert bad.returncode != 0
    assert "ImproperlyConfigured" in bad.stderr and gc_policy.ENV in bad.stderr
