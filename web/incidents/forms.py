"""Forms: the incident list filters (an invalid filter is a 400) and the incident page's actions."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import forms
from django.db.models import QuerySet

from incidents import causes
from incidents.models import DiagnosisRun, Incident
from rcaweb.cursor import CursorError, parse_t


class UtcTimeField(forms.CharField):
    """``2026-11-29T03:12:00Z``: the same format as the cursor, with the same error."""

    def to_python(self, value: str | None) -> datetime | None:  # type: ignore[override]  # a time, not a CharField's str
        value = super().to_python(value)
        if not value:
            return None
        try:
            return parse_t(value)
        except CursorError as exc:
            raise forms.ValidationError(str(exc).replace("t=", "", 1))


class IncidentFilterForm(forms.Form):
    """``/incidents/?status=open&cluster=gpu-prod&project=vision&severity=critical&since=…&until=…``."""

    status = forms.ChoiceField(
        choices=[("", "any"), ("active", "not resolved"), *Incident.STATUSES], required=False
    )
    severity = forms.ChoiceField(choices=[("", "any"), *Incident.SEVERITIES], required=False)
    cluster = forms.SlugField(max_length=63, required=False)
    project = forms.CharField(max_length=253, required=False)
    cause = forms.CharField(
        max_length=300,
        required=False,
        help_text="the top hypothesis at the cursor: a diagnosis code or its name (gpu_missing, GPU missing, "
        "quota)",
        widget=forms.TextInput(attrs={"list": "cause-names"}),
    )
    since = UtcTimeField(required=False, help_text="onset at or after (UTC)")
    until = UtcTimeField(required=False, help_text="onset before (UTC)")
    page = forms.IntegerField(min_value=1, max_value=10_000, required=False)
    cause_codes: tuple[str, ...] = ()  # what ``cause`` names, once clean (clean_cause)

    def clean_cause(self) -> str:
        """A problem's key (``code|kind/name``, the home page's links) as it is; otherwise a code or a name,
        which must name at least one code (``self.cause_codes``)."""
        value: str = self.cleaned_data.get("cause") or ""
        self.cause_codes = ()
        if value and "|" not in value:
            self.cause_codes = tuple(causes.codes_for(value))
            if not self.cause_codes:
                raise forms.ValidationError(
                    f"no diagnosis code or name matches {value!r}: try a code such as gpu_missing or its "
                    "name, GPU missing"
                )
        return value

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        if data.get("since") and data.get("until") and data["since"] >= data["until"]:
            raise forms.ValidationError("since must be before until")
        return data

    def filter(self, qs: QuerySet[Incident], t: datetime) -> QuerySet[Incident]:
        """The incidents that match, annotated with ``run_at_t`` (incidents.causes.run_in_force): the cause
        filter reads the top hypothesis of the run in force at the cursor ``t``, as the list shows it."""
        d = self.cleaned_data
        qs = qs.annotate(run_at_t=causes.run_in_force(t))
        if d.get("status") == "active":
            qs = qs.exclude(status="resolved")
        elif d.get("status"):
            qs = qs.filter(status=d["status"])
        if self.cause_codes:
            qs = qs.filter(
                run_at_t__in=DiagnosisRun.objects.filter(top_code__in=self.cause_codes).values("pk")
            )
        elif d.get("cause"):
            qs = qs.filter(cause_key=d["cause"])
        if d.get("severity"):
            qs = qs.filter(severity=d["severity"])
        if d.get("cluster"):
            qs = qs.filter(cluster__name=d["cluster"])
        if d.get("project"):
            qs = qs.filter(subjects__kind="project", subjects__name=d["project"]).distinct()
        if d.get("since"):
            qs = qs.filter(onset__gte=d["since"])
        if d.get("until"):
            qs = qs.filter(onset__lt=d["until"])
        return qs


class StatusForm(forms.Form):
    status = forms.ChoiceField(choices=Incident.STATUSES)


class OwnerForm(forms.Form):
    owner = forms.CharField(max_length=150, required=False, strip=True)
