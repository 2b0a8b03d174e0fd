"""Filters of the console pages: one Form per page; an invalid filter is a 400 naming the field."""

from __future__ import annotations

from datetime import timedelta

from django import forms

from collectors.models import KIND_CHOICES, Change, Cluster
from rcaweb.durations import format_duration, parse_duration


class ScopeForm(forms.Form):
    """``?cluster=`` (optional): restricts a console page to one cluster."""

    cluster = forms.SlugField(required=False, max_length=63)

    def clean_cluster(self) -> Cluster | None:
        name = self.cleaned_data.get("cluster")
        if not name:
            return None
        try:
            return Cluster.objects.get(name=name)
        except Cluster.DoesNotExist:
            raise forms.ValidationError(f"unknown cluster {name!r}")


class SloForm(ScopeForm):
    """``?target=30m``: the queue-time objective (between 1m and 7d)."""

    target = forms.CharField(required=False, max_length=20)

    def clean_target(self) -> timedelta | None:
        raw = self.cleaned_data.get("target")
        if not raw:
            return None
        try:
            value = parse_duration(raw)
        except ValueError as exc:
            raise forms.ValidationError(str(exc))
        if not timedelta(minutes=1) <= value <= timedelta(days=7):
            raise forms.ValidationError(f"target {format_duration(value)} is out of range (1m to 7d)")
        return value


SLO_METRICS = [
    ("wait", "jobs that started in the window"),
    ("over", "jobs that waited longer than the target"),
    ("waiting", "jobs still waiting beyond the target"),
    ("reason", "jobs that waited for a scheduler reason"),
    ("code", "diagnosed hypotheses"),
    ("restarts", "pods that restarted"),
    ("preemptions", "preempted pods"),
]


class SloJobsForm(SloForm):
    """The jobs behind one SLO number: ``?metric=over&project=vision``."""

    metric = forms.ChoiceField(choices=SLO_METRICS)
    project = forms.CharField(required=False, max_length=253)
    queue = forms.CharField(required=False, max_length=253)
    reason = forms.CharField(required=False, max_length=200)


class ChangeFilterForm(ScopeForm):
    """Filters of /changes/; every field is a query parameter named after what it filters."""

    project = forms.CharField(required=False, max_length=253)
    node = forms.CharField(required=False, max_length=253)
    kind = forms.ChoiceField(
        required=False, choices=[("", "any kind"), *KIND_CHOICES, ("external", "external")]
    )
    field = forms.CharField(required=False, max_length=200)
    actor = forms.CharField(required=False, max_length=200)
    source = forms.ChoiceField(required=False, choices=[("", "any source"), *Change.SOURCES])
    show = forms.ChoiceField(
        required=False,
        choices=[("", "signal first, churn summed"), ("all", "every change, one per row")],
    )
    page = forms.IntegerField(required=False, min_value=1, max_value=1000)
