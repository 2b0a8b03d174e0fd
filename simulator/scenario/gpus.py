"""The GPU catalog: GPU feature discovery product names, their memory and their MIG profiles.

``nvidia.com/gpu.product`` is what GPU feature discovery (GFD) writes: the CUDA device name with spaces
replaced by ``-`` (``NVIDIA-A100-SXM4-80GB``, ``NVIDIA-L40S``, ``Tesla-T4``). ``nvidia.com/gpu.memory`` is
the framebuffer in MiB as NVML reports it. A product not listed here is still accepted when its name
carries ``<n>GB`` (memory ``n`` × 1024 MiB, no MIG).

MIG profiles (NVIDIA MIG user guide, "Supported MIG profiles"): ``<c>g.<m>gb`` takes ``c`` compute slices
and a number of memory slices of the GPU; a layout fits when both sums stay within the GPU's slices
(A100/H100/H200/B200: 7 compute, 8 memory; A30: 4 and 4). Instance memory is the profile's ``<m>gb`` in MiB
(×1024), which is what GFD's ``nvidia.com/mig-<profile>.memory`` rounds to within a few percent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class MigProfile:
    name: str  # "3g.40gb"
    compute_slices: int  # the "3g"
    memory_slices: int  # out of the GPU's memory slices
    memory_mib: int

    @property
    def resource(self) -> str:
        """The extended resource the device plugin advertises under the mixed strategy."""
        return f"nvidia.com/mig-{self.name}"


@dataclass(frozen=True)
class GpuModel:
    product: str  # GFD nvidia.com/gpu.product
    memory_mib: int  # GFD nvidia.com/gpu.memory
    family: str  # GFD nvidia.com/gpu.family
    compute_slices: int = 0  # 0: no MIG
    memory_slices: int = 0
    mig_profiles: tuple[MigProfile, ...] = ()

    def profile(self, name: str) -> MigProfile | None:
        for p in self.mig_profiles:
            if p.name == name:
                return p
        return None


def _profiles(spec: str) -> tuple[MigProfile, ...]:
    """``"1g.10gb:1 2g.20gb:2"``: profile name and memory slices, compute slices read from the name."""
    out = []
    for item in spec.split():
        name, mem = item.split(":")
        c = int(name.split("g.", 1)[0])
        gb = int(name.split(".", 1)[1].removesuffix("gb"))
        out.append(MigProfile(name, c, int(mem), gb * 1024))
    return tuple(out)


_A100_40 = _profiles("1g.5gb:1 1g.10gb:2 2g.10gb:2 3g.20gb:4 4g.20gb:4 7g.40gb:8")
_A100_80 = _profiles("1g.10gb:1 1g.20gb:2 2g.20gb:2 3g.40gb:4 4g.40gb:4 7g.80gb:8")
_H100_94 = _profiles("1g.12gb:1 1g.24gb:2 2g.24gb:2 3g.47gb:4 4g.47gb:4 7g.94gb:8")
_H200 = _profiles("1g.18gb:1 1g.35gb:2 2g.35gb:2 3g.71gb:4 4g.71gb:4 7g.141gb:8")
_GH200 = _profiles("1g.12gb:1 1g.24gb:2 2g.24gb:2 3g.48gb:4 4g.48gb:4 7g.96gb:8")
_B200 = _profiles("1g.23gb:1 1g.45gb:2 2g.45gb:2 3g.90gb:4 4g.90gb:4 7g.180gb:8")
_GB200 = _profiles("1g.23gb:1 1g.47gb:2 2g.47gb:2 3g.93gb:4 4g.93gb:4 7g.186gb:8")
_A30 = _profiles("1g.6gb:1 2g.12gb:2 4g.24gb:4")

_MODELS = (
    GpuModel("Tesla-T4", 15360, "turing"),
    GpuModel("Tesla-V100-SXM2-16GB", 16384, "volta"),
    GpuModel("Tesla-V100-SXM2-32GB", 32768, "volta"),
    GpuModel("Tesla-V100-PCIE-16GB", 16384, "volta"),
    GpuModel("Tesla-V100-PCIE-32GB", 32768, "volta"),
    GpuModel("Tesla-V100S-PCIE-32GB", 32768, "volta"),
    GpuModel("NVIDIA-A10", 23028, "ampere"),
    GpuModel("NVIDIA-A10G", 23028, "ampere"),
    GpuModel("NVIDIA-A30", 24576, "ampere", 4, 4, _A30),
    GpuModel("NVIDIA-A40", 46068, "ampere"),
    GpuModel("NVIDIA-A100-SXM4-40GB", 40960, "ampere", 7, 8, _A100_40),
    GpuModel("NVIDIA-A100-PCIE-40GB", 40960, "ampere", 7, 8, _A100_40),
    GpuModel("NVIDIA-A100-SXM4-80GB", 81920, "ampere", 7, 8, _A100_80),
    GpuModel("NVIDIA-A100-80GB-PCIe", 81920, "ampere", 7, 8, _A100_80),
    GpuModel("NVIDIA-L4", 23034, "ada-lovelace"),
    GpuModel("NVIDIA-L40", 46068, "ada-lovelace"),
    GpuModel("NVIDIA-L40S", 46068, "ada-lovelace"),
    GpuModel("NVIDIA-H100-80GB-HBM3", 81559, "hopper", 7, 8, _A100_80),
    GpuModel("NVIDIA-H100-PCIe", 81559, "hopper", 7, 8, _A100_80),
    GpuModel("NVIDIA-H100-NVL", 95830, "hopper", 7, 8, _H100_94),
    GpuModel("NVIDIA-H200", 143771, "hopper", 7, 8, _H200),
    GpuModel("NVIDIA-H200-NVL", 143771, "hopper", 7, 8, _H200),
    GpuModel("NVIDIA-GH200-480GB", 97871, "hopper", 7, 8, _GH200),
    GpuModel("NVIDIA-B200", 183359, "blackwell", 7, 8, _B200),
    GpuModel("NVIDIA-GB200", 189471, "blackwell", 7, 8, _GB200),
)
CATALOG: dict[str, GpuModel] = {m.product: m for m in _MODELS}
# Every MIG profile name of the catalog (a job may ask for one that no node of its cluster offers).
MIG_PROFILE_NAMES = frozenset(p.name for m in _MODELS for p in m.mig_profiles)
_GB_RE = re.compile(r"(\d+)GB")


def gpu_model(product: str) -> GpuModel | None:
    """The catalog entry, or a MIG-less model from the ``<n>GB`` in an unlisted name; None when neither."""
    if product in CATALOG:
        return CATALOG[product]
    m = _GB_RE.search(product)
    return GpuModel(product, int(m.group(1)) * 1024, "unknown") if m else None


def layout_problem(model: GpuModel, layout: dict[str, int]) -> str | None:
    """Why a MIG layout (profile -> instances per GPU) cannot be applied to one GPU of ``model``, or None."""
    if not model.mig_profiles:
        return f"{model.product} does not support MIG"
    compute = memory = 0
    for name, count in layout.items():
        p = model.profile(name)
        if p is None:
            return (
                f"{model.product} has no MIG profile {name!r}; its profiles are "
                f"{', '.join(q.name for q in model.mig_profiles)}"
            )
        compute += p.compute_slices * count
        memory += p.memory_slices * count
    if compute > model.compute_slices:
        return f"the layout takes {compute} compute slices and {model.product} has {model.compute_slices}"
    if memory > model.memory_slices:
        return f"the layout takes {memory} memory slices and {model.product} has {model.memory_slices}"
    return None


def mig_config_name(model: GpuModel, layout: dict[str, int]) -> str:
    """The mig-parted config name of the GPU Operator's default ConfigMap (``all-disabled``, ``all-1g.10gb``:
    as many instances of one profile as fit); any other layout gets a ``custom-`` name built from it."""
    if not layout:
        return "all-disabled"
    if len(layout) == 1:
        ((name, count),) = layout.items()
        p = model.profile(name)
        if p is not None and count == min(
            model.compute_slices // p.compute_slices, model.memory_slices // p.memory_slices
        ):
            return f"all-{name}"
    return "custom-" + "-".join(f"{n}x{p}" for p, n in sorted(layout.items()))
