"""What dcgm-exporter exports, apart from the samples: its fields (name, type, help), the labels that name the
exporter and its node, how a MIG instance stands in for its GPU, and which labels follow the pod holding a GPU."""

from __future__ import annotations

import functools
import hashlib
from typing import Any

DRIVER_VERSION = "550.127.08"
EXPORTER_NAMESPACE = "gpu-operator"
# (name, type, help) as dcgm-exporter's counters CSV describes them.
METRICS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors."),
    (
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "counter",
        "Total number of NVLink flow-control CRC errors.",
    ),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned."),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
)


@functools.lru_cache(maxsize=65536)
def node_ip(name: str) -> str:
    digest = hashlib.sha256(f"node/{name}".encode()).digest()
    return f"10.0.{digest[0]}.{max(digest[1], 2)}"


# Under MIG, dcgm-exporter reports every GPU instance as its own series (labels GPU_I_PROFILE, GPU_I_ID, the
# parent GPU's UUID and index); profiling and framebuffer fields are the instance's own, device-level fields
# (temperature, power, clocks, Xid, ECC, NVLink) are the parent GPU's.
PER_INSTANCE = frozenset(
    {
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
    }
)


class MigView:
    """One MIG GPU instance seen as a DCGM entity: the parent GPU's identity plus the instance."""

    __slots__ = ("gpu", "instance")

    def __init__(self, gpu: Any, instance: Any) -> None:
        self.gpu = gpu
        self.instance = instance

    def __getattr__(self, name: str) -> Any:
        return getattr(self.gpu, name)

    @property
    def key(self) -> tuple[int, int]:
        return (self.gpu.index, self.instance.gi_id)


def telemetry_key(gpu: Any, metric: str | None = None) -> Any:
    if isinstance(gpu, MigView) and (metric is None or metric in PER_INSTANCE):
        return gpu.key
    return gpu.index


def exporter_pod(node_name: str) -> str:
    """The dcgm-exporter DaemonSet pod on a node (gpu-operator names it nvidia-dcgm-exporter-<5 chars>)."""
    return f"nvidia-dcgm-exporter-{hashlib.sha256(node_name.encode()).hexdigest()[:5]}"


def dynamic_label(name: str, variant: str) -> bool:
    if variant == "scraped":
        return name.startswith("exported_")
    return name in ("pod", "namespace", "container")
