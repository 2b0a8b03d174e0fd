"""When an allocated GPU counts as active or as used well: thresholds on DCGM's SM activity."""

from __future__ import annotations

from django.conf import settings

# SM activity (DCGM_FI_PROF_SM_ACTIVE, a 0..1 ratio) above which an allocated GPU counts as active,
# and above which it counts as "used well". The idle threshold matches the simulator's GPUIdleAllocated rule.
ACTIVE_SM = float(getattr(settings, "RCAWEB_ACTIVE_SM_THRESHOLD", 0.1))
WELL_USED_SM = float(getattr(settings, "RCAWEB_WELL_USED_SM_THRESHOLD", 0.5))
SM_METRIC = "DCGM_FI_PROF_SM_ACTIVE"
SAMPLE_STEP_MIN = 5  # TelemetrySample points are 5-minute averages (docs/inventory.md)
