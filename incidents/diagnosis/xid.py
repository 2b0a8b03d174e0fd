"""NVIDIA Xid catalog: what an Xid means, its likely cause, and whether to drain.

Sources (NVIDIA's own; read, not copied):
- "Analyzing Xid Errors with the Xid Catalog",
  https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html — per Xid
  the mnemonic and the resolution buckets (RESTART_APP, RESET_GPU, RESTART_BM,
  WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR, CONTACT_SUPPORT, IGNORE, ...).
- NVIDIA/NVSentinel, distros/kubernetes/nvsentinel/charts/gpu-health-monitor/
  xiderrorsmapping.csv — NVIDIA's machine-readable form of that catalog:
  code, mnemonic, immediate resolution bucket, FATAL/NONFATAL.
- "Xid Errors", https://docs.nvidia.com/deploy/xid-errors/index.html — the older
  table of descriptions with possible causes (HW error, driver error, user app
  error, system memory corruption, bus error, thermal issue, FB corruption).

`drain_node` follows the catalog's FATAL flag: true where NVIDIA's immediate
action is a GPU reset, a node (bare-metal) reboot, a hardware workflow or
support; false where restarting the application is enough or the event is
informational. `likely_cause` condenses the old "possible causes" columns into
one word for a page badge: application | driver | hardware | thermal | system | unknown.
"""

from __future__ import annotations

import logging
import re
from dataclasses import asdict, dataclass

# The driver's report of an Xid in kernel logs and the node events relayed from them: "NVRM: Xid (PCI:…): 79".
XID_TEXT = re.compile(r"\bXid\b[^0-9]*(?:\([^)]*\))?[:\s]*(\d{1,3})", re.I)

logger = logging.getLogger(__name__)

CAUSES = ("application", "driver", "hardware", "thermal", "system", "unknown")

# Immediate-action bucket -> the action NVIDIA documents for it.
ACTIONS: dict[str, str] = {
    "RESTART_APP": "Restart the application; the GPU stays usable. If it recurs, debug the application/CUDA code.",
    "IGNORE": "No immediate action: informational event. Keep monitoring.",
    "RESET_GPU": "Drain the GPU, then reset it (nvidia-smi -r) or reboot the node; contact NVIDIA support if it recurs.",
    "RESTART_BM": "Drain the node and reboot it (bare-metal power cycle); service the GPU if it does not come back.",
    "WORKFLOW_XID_48": (
        "Follow NVIDIA's Xid 48 workflow: drain, reset the GPU so the failing memory is retired/remapped, "
        "check row-remapping status; service the GPU if remapping failed or errors recur."
    ),
    "WORKFLOW_XID_45": (
        "Xid 45 is cleanup after an earlier error: find and act on the Xid that preceded it, then restart the application."
    ),
    "WORKFLOW_NVLINK_ERR": (
        "Follow NVIDIA's NVLink workflow: drain the node, reset the GPUs on the link (or reboot), "
        "check NVLink/NVSwitch health; service the link or board if it persists."
    ),
    "WORKFLOW_NVLINK5_ERR": (
        "Follow NVIDIA's NVLink5 workflow: drain, reset the GPU (or the NVLink domain), check fabric manager "
        "and NVLink health; service if it persists."
    ),
    "CHECK_MECHANICALS": "Check the board's auxiliary power connectors and cooling; drain until fixed.",
    "UPDATE_SWFW": "Update the driver/firmware so host and guest (vGPU) versions are supported.",
    "RESTART_VM": "Restart the VM (confidential-computing key rotation failed).",
    "CHECK_UVM": "Check the UVM / driver state and restart the application.",
    "CONTACT_SUPPORT": "Unexpected on data-center GPUs: collect nvidia-bug-report.sh output and contact NVIDIA support.",
    "LINKED": "Follow the guidance of the Xid this event links to; it reports a changed GPU recovery action.",
}

# code: (mnemonic, title, immediate bucket, fatal, likely cause or None = derive from bucket)
# One row per line so the table reads like NVIDIA's.
# fmt: off
_CATALOG: dict[int, tuple[str, str, str, bool, str | None]] = {
    1: ("ROBUST_CHANNEL_FIFO_ERROR_FIFO_METHOD", "Invalid or corrupted push buffer stream (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    2: ("ROBUST_CHANNEL_FIFO_ERROR_SW_METHOD", "Invalid or corrupted push buffer stream (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    3: ("ROBUST_CHANNEL_FIFO_ERROR_UNK_METHOD", "Invalid or corrupted push buffer stream (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    4: ("ROBUST_CHANNEL_FIFO_ERROR_CHANNEL_BUSY", "Invalid push buffer stream or GPU semaphore timeout (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    5: ("ROBUST_CHANNEL_FIFO_ERROR_RUNOUT_OVERFLOW", "Unused", "CONTACT_SUPPORT", True, None),
    6: ("ROBUST_CHANNEL_FIFO_ERROR_PARSE_ERR", "Invalid or corrupted push buffer stream (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    7: ("ROBUST_CHANNEL_FIFO_ERROR_PTE_ERR", "Invalid or corrupted push buffer address (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "GPU stopped processing", "RESTART_APP", False, "application"),
    9: ("ROBUST_CHANNEL_GR_ERROR_INSTANCE", "Driver error programming GPU (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    10: ("ROBUST_CHANNEL_GR_ERROR_SINGLE_STEP", "Unused", "CONTACT_SUPPORT", True, None),
    11: ("ROBUST_CHANNEL_GR_ERROR_MISSING_HW", "Invalid or corrupted push buffer stream", "RESTART_APP", False, "application"),
    12: ("ROBUST_CHANNEL_GR_ERROR_SW_METHOD", "Driver error handling GPU exception (unused on Ampere+)", "CONTACT_SUPPORT", True, None),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION", "Graphics Engine Exception", "RESTART_APP", False, "application"),
    14: ("ROBUST_CHANNEL_FAKE_ERROR", "Test (fake) error", "IGNORE", False, "unknown"),
    15: ("ROBUST_CHANNEL_SCANLINE_TIMEOUT", "Unused", "CONTACT_SUPPORT", True, None),
    16: ("ROBUST_CHANNEL_VBLANK_CALLBACK_TIMEOUT", "Display engine hung", "CONTACT_SUPPORT", True, "driver"),
    17: ("ROBUST_CHANNEL_PARAMETER_ERROR", "Unused", "CONTACT_SUPPORT", True, None),
    18: ("ROBUST_CHANNEL_BUS_MASTER_TIMEOUT_ERROR", "Bus mastering disabled in PCI Config Space", "CONTACT_SUPPORT", True, "driver"),
    19: ("ROBUST_CHANNEL_DISP_MISSED_NOTIFIER", "Display Engine error", "CONTACT_SUPPORT", True, "driver"),
    20: ("ROBUST_CHANNEL_MPEG_ERROR_SW_METHOD", "Invalid or corrupted Mpeg push buffer", "CONTACT_SUPPORT", True, None),
    21: ("ROBUST_CHANNEL_ME_ERROR_SW_METHOD", "Invalid or corrupted Motion Estimation push buffer", "CONTACT_SUPPORT", True, None),
    22: ("ROBUST_CHANNEL_VP_ERROR_SW_METHOD", "Invalid or corrupted Video Processor push buffer", "CONTACT_SUPPORT", True, None),
    23: ("ROBUST_CHANNEL_RC_LOGGING_ENABLED", "Unused", "CONTACT_SUPPORT", True, None),
    24: ("ROBUST_CHANNEL_GR_SEMAPHORE_TIMEOUT", "GPU semaphore timeout", "CONTACT_SUPPORT", True, None),
    25: ("ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY", "Invalid or illegal push buffer stream", "RESTART_APP", False, "application"),
    26: ("ROBUST_CHANNEL_FIFO_ERROR_FBISTATE_TIMEOUT", "Framebuffer timeout", "CONTACT_SUPPORT", True, "driver"),
    27: ("ROBUST_CHANNEL_VP_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    28: ("ROBUST_CHANNEL_VP2_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    29: ("ROBUST_CHANNEL_BSP_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    30: ("ROBUST_CHANNEL_BAD_ADDR_ACCESS", "GPU semaphore access error", "CONTACT_SUPPORT", True, "driver"),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", False, "application"),
    32: ("ROBUST_CHANNEL_PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP", False, "system"),
    33: ("ROBUST_CHANNEL_SEC_ERROR", "Internal micro-controller error", "CONTACT_SUPPORT", True, "driver"),
    34: ("ROBUST_CHANNEL_MSVLD_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    35: ("ROBUST_CHANNEL_MSPDEC_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    36: ("ROBUST_CHANNEL_MSPPP_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    37: ("ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD", "Driver firmware error", "IGNORE", False, "driver"),
    38: ("ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT", "Driver firmware error", "IGNORE", False, "driver"),
    39: ("ROBUST_CHANNEL_CE0_ERROR", "Copy Engine (CE0) exception", "RESTART_APP", False, None),
    40: ("ROBUST_CHANNEL_CE1_ERROR", "Copy Engine (CE1) exception", "RESTART_APP", False, None),
    41: ("ROBUST_CHANNEL_CE2_ERROR", "Copy Engine (CE2) exception", "RESTART_APP", False, None),
    42: ("ROBUST_CHANNEL_VIC_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    43: ("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (channel reset after an application fault)", "IGNORE", False, "application"),
    44: ("ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW", "Graphics Engine fault during context switch", "IGNORE", False, "driver"),
    45: ("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "Preemptive cleanup, due to previous errors", "WORKFLOW_XID_45", False, "application"),
    46: ("ROBUST_CHANNEL_GPU_TIMEOUT_ERROR", "GPU stopped processing (GPU timeout)", "RESET_GPU", True, "driver"),
    47: ("ROBUST_CHANNEL_NVENC0_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48", True, "hardware"),
    49: ("SILENT_RUNNING_CONSTANT_LEVEL_SET_BY_REGISTRY", "Unused", "CONTACT_SUPPORT", True, None),
    50: ("SILENT_RUNNING_LEVEL_TRANSITION_DUE_TO_RC_ERROR", "Unused", "CONTACT_SUPPORT", True, None),
    51: ("SILENT_RUNNING_STRESS_TEST_FAILURE", "Unused", "CONTACT_SUPPORT", True, None),
    52: ("SILENT_RUNNING_LEVEL_TRANS_DUE_TO_TEMP_RISE", "Unused (temperature-driven level transition)", "CONTACT_SUPPORT", True, "thermal"),
    53: ("SILENT_RUNNING_TEMP_REDUCED_CLOCKING", "Unused (temperature-reduced clocking)", "CONTACT_SUPPORT", True, "thermal"),
    54: ("SILENT_RUNNING_PWR_REDUCED_CLOCKING", "Auxiliary power is not connected to the GPU board", "CHECK_MECHANICALS", True, "hardware"),
    55: ("SILENT_RUNNING_TEMPERATURE_READ_ERROR", "Unused (temperature read error)", "CONTACT_SUPPORT", True, "thermal"),
    56: ("DISPLAY_CHANNEL_EXCEPTION", "Display Engine error", "CONTACT_SUPPORT", True, "hardware"),
    57: ("FB_LINK_TRAINING_FAILURE_ERROR", "Error programming video memory interface", "CONTACT_SUPPORT", True, "hardware"),
    58: ("FB_MEMORY_ERROR", "Unstable video memory interface detected", "CONTACT_SUPPORT", True, "hardware"),
    59: ("PMU_ERROR", "Internal micro-controller error (older drivers)", "CONTACT_SUPPORT", True, "driver"),
    60: ("ROBUST_CHANNEL_SEC2_ERROR", "Video processor exception", "RESTART_APP", False, None),
    61: ("PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning", "CONTACT_SUPPORT", True, "driver"),
    62: ("PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", True, "hardware"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "ECC page retirement or row remapping recording event", "IGNORE", False, "hardware"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "ECC page retirement or row remapper recording failure", "RESET_GPU", True, "hardware"),
    65: ("ROBUST_CHANNEL_NVENC1_ERROR", "Video processor exception", "CONTACT_SUPPORT", True, None),
    66: ("ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION", "Illegal access by driver", "IGNORE", False, "driver"),
    67: ("ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION", "Illegal access by driver", "IGNORE", False, "driver"),
    68: ("ROBUST_CHANNEL_NVDEC0_ERROR", "NVDEC0 exception", "RESTART_APP", False, None),
    69: ("ROBUST_CHANNEL_GR_CLASS_ERROR", "Graphics Engine class error", "RESTART_APP", False, None),
    70: ("ROBUST_CHANNEL_CE3_ERROR", "Copy Engine (CE3) exception", "RESTART_APP", False, None),
    71: ("ROBUST_CHANNEL_CE4_ERROR", "Copy Engine (CE4) exception", "RESTART_APP", False, None),
    72: ("ROBUST_CHANNEL_CE5_ERROR", "Copy Engine (CE5) exception", "RESTART_APP", False, None),
    73: ("ROBUST_CHANNEL_NVENC2_ERROR", "NVENC2 error", "CONTACT_SUPPORT", True, None),
    74: ("NVLINK_ERROR", "NVLink error", "WORKFLOW_NVLINK_ERR", True, "hardware"),
    75: ("ROBUST_CHANNEL_CE6_ERROR", "Copy Engine (CE6) exception", "RESTART_APP", False, None),
    76: ("ROBUST_CHANNEL_CE7_ERROR", "Copy Engine (CE7) exception", "RESTART_APP", False, None),
    77: ("ROBUST_CHANNEL_CE8_ERROR", "Copy Engine (CE8) exception", "RESTART_APP", False, None),
    78: ("VGPU_START_ERROR", "vGPU start error", "UPDATE_SWFW", True, "driver"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", True, "hardware"),
    80: ("PBDMA_PUSHBUFFER_CRC_MISMATCH", "Corrupted data sent to GPU", "RESTART_APP", False, "system"),
    81: ("ROBUST_CHANNEL_VGA_SUBSYSTEM_ERROR", "VGA subsystem error", "CONTACT_SUPPORT", True, "hardware"),
    82: ("ROBUST_CHANNEL_NVJPG0_ERROR", "NVJPG0 error", "RESTART_APP", False, None),
    83: ("ROBUST_CHANNEL_NVDEC1_ERROR", "NVDEC1 error", "RESTART_APP", False, None),
    84: ("ROBUST_CHANNEL_NVDEC2_ERROR", "NVDEC2 error", "RESTART_APP", False, None),
    85: ("ROBUST_CHANNEL_CE9_ERROR", "Copy Engine (CE9) exception", "RESTART_APP", False, None),
    86: ("ROBUST_CHANNEL_OFA0_ERROR", "OFA (optical flow accelerator) exception", "RESTART_APP", False, None),
    87: ("NVTELEMETRY_DRIVER_REPORT", "Reserved (driver telemetry report)", "CONTACT_SUPPORT", True, None),
    88: ("ROBUST_CHANNEL_NVDEC3_ERROR", "NVDEC3 error", "RESTART_APP", False, None),
    89: ("ROBUST_CHANNEL_NVDEC4_ERROR", "NVDEC4 error", "RESTART_APP", False, None),
    90: ("LTC_ERROR", "Reserved (L2 cache error)", "CONTACT_SUPPORT", True, "hardware"),
    91: ("RESERVED_XID", "Reserved", "CONTACT_SUPPORT", True, None),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", False, "hardware"),
    93: ("INFOROM_ERASE_LIMIT_EXCEEDED", "Non-fatal violation of provisioned InfoROM wear limit", "IGNORE", False, "hardware"),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "Contained ECC error", "RESTART_APP", False, "hardware"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained ECC error", "RESET_GPU", True, "hardware"),
    96: ("ROBUST_CHANNEL_NVDEC5_ERROR", "NVDEC5 error", "RESTART_APP", False, None),
    97: ("ROBUST_CHANNEL_NVDEC6_ERROR", "NVDEC6 error", "RESTART_APP", False, None),
    98: ("ROBUST_CHANNEL_NVDEC7_ERROR", "NVDEC7 error", "RESTART_APP", False, None),
    99: ("ROBUST_CHANNEL_NVJPG1_ERROR", "NVJPG1 error", "RESTART_APP", False, None),
    100: ("ROBUST_CHANNEL_NVJPG2_ERROR", "NVJPG2 error", "RESTART_APP", False, None),
    101: ("ROBUST_CHANNEL_NVJPG3_ERROR", "NVJPG3 error", "RESTART_APP", False, None),
    102: ("ROBUST_CHANNEL_NVJPG4_ERROR", "NVJPG4 error", "RESTART_APP", False, None),
    103: ("ROBUST_CHANNEL_NVJPG5_ERROR", "NVJPG5 error", "RESTART_APP", False, None),
    104: ("ROBUST_CHANNEL_NVJPG6_ERROR", "NVJPG6 error", "RESTART_APP", False, None),
    105: ("ROBUST_CHANNEL_NVJPG7_ERROR", "NVJPG7 error", "RESTART_APP", False, None),
    106: ("SMBPBI_TEST_MESSAGE", "SMBPBI test message", "IGNORE", False, "unknown"),
    107: ("SMBPBI_TEST_MESSAGE_SILENT", "SMBPBI test message (silent)", "IGNORE", False, "unknown"),
    108: ("DESTINATION_FLA_TRANSLATION_ERROR", "Reserved (destination FLA translation error)", "CONTACT_SUPPORT", True, None),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "Context switch timeout error", "RESET_GPU", True, "driver"),
    110: ("SEC_FAULT_ERROR", "Security fault error", "RESET_GPU", True, "hardware"),
    111: ("BUNDLE_ERROR_EVENT", "Display bundle error event", "CONTACT_SUPPORT", True, "hardware"),
    112: ("DISP_SUPERVISOR_ERROR", "Display supervisor error", "CONTACT_SUPPORT", True, "hardware"),
    113: ("DP_LT_FAILURE", "DisplayPort link training error", "CONTACT_SUPPORT", True, "hardware"),
    114: ("HEAD_RG_UNDERFLOW", "Display pipeline underflow error", "CONTACT_SUPPORT", True, "hardware"),
    115: ("CORE_CHANNEL_REGS", "Display core channel error", "CONTACT_SUPPORT", True, "driver"),
    116: ("WINDOW_CHANNEL_REGS", "Display window channel error", "CONTACT_SUPPORT", True, "driver"),
    117: ("CURSOR_CHANNEL_REGS", "Display cursor channel error", "CONTACT_SUPPORT", True, "driver"),
    118: ("HEAD_REGS", "Display pipeline error", "CONTACT_SUPPORT", True, "driver"),
    119: ("GSP_RPC_TIMEOUT", "GSP RPC timeout", "RESET_GPU", True, "driver"),
    120: ("GSP_ERROR", "GSP error", "RESET_GPU", True, "driver"),
    121: ("C2C_ERROR", "C2C link error", "IGNORE", False, "hardware"),
    122: ("SPI_PMU_RPC_READ_FAIL", "SPI PMU RPC read failure", "CONTACT_SUPPORT", True, "hardware"),
    123: ("SPI_PMU_RPC_WRITE_FAIL", "SPI PMU RPC write failure", "CONTACT_SUPPORT", True, "hardware"),
    124: ("SPI_PMU_RPC_ERASE_FAIL", "SPI PMU RPC erase failure", "CONTACT_SUPPORT", True, "hardware"),
    125: ("INFOROM_FS_ERROR", "InfoROM filesystem failure", "CONTACT_SUPPORT", True, "hardware"),
    136: ("ALI_TRAINING_FAIL", "NVLink link training (ALI) failure", "RESET_GPU", True, "hardware"),
    137: ("NVLINK_FLA_PRIV_ERR", "NVLink FLA privilege error", "IGNORE", False, "application"),
    138: ("ROBUST_CHANNEL_DLA_ERROR", "DLA error", "CONTACT_SUPPORT", True, None),
    139: ("ROBUST_CHANNEL_OFA1_ERROR", "OFA1 exception", "RESTART_APP", False, None),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "Unrecovered ECC error", "RESET_GPU", True, "hardware"),
    141: ("ROBUST_CHANNEL_FAST_PATH_ERROR", "Fast-path error", "IGNORE", False, "driver"),
    142: ("ROBUST_CHANNEL_NVENC3_ERROR", "NVENC3 error", "CONTACT_SUPPORT", True, None),
    143: ("GPU_INIT_ERROR", "GPU initialization failure", "RESET_GPU", True, "hardware"),
    144: ("NVLINK_SAW_ERROR", "NVLink SAW error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    145: ("NVLINK_RLW_ERROR", "NVLink RLW error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    146: ("NVLINK_TLW_ERROR", "NVLink TLW error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    147: ("NVLINK_TREX_ERROR", "NVLink TREX error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "NVLink NVLPW control error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    149: ("NVLINK_NETIR_ERROR", "NVLink NETIR error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    150: ("NVLINK_MSE_ERROR", "NVLink MSE error", "WORKFLOW_NVLINK5_ERR", True, "hardware"),
    151: ("ROBUST_CHANNEL_KEY_ROTATION_ERROR", "Key rotation error (confidential computing)", "RESTART_VM", True, "system"),
    152: ("ROBUST_CHANNEL_DLA_SMMU_ERROR", "DLA SMMU error", "IGNORE", False, "driver"),
    153: ("ROBUST_CHANNEL_DLA_TIMEOUT", "DLA timeout", "IGNORE", False, "driver"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed", "LINKED", False, "unknown"),
    155: ("NVLINK_SW_DEFINED_ERROR", "NVLink software-defined error", "RESET_GPU", True, "hardware"),
    156: ("RESOURCE_RETIREMENT_EVENT", "Resource retirement event", "RESET_GPU", True, "hardware"),
    157: ("RESOURCE_RETIREMENT_FAILURE", "Resource retirement failure", "IGNORE", False, "hardware"),
    158: ("GPU_FATAL_TIMEOUT", "GPU fatal timeout", "RESET_GPU", True, "hardware"),
    159: ("ROBUST_CHANNEL_CHI_NON_DATA_ERROR", "CHI non-data error", "CHECK_UVM", False, "driver"),
    160: ("CHANNEL_RETIREMENT_EVENT", "Channel retirement event", "RESTART_BM", True, "hardware"),
    161: ("CHANNEL_RETIREMENT_FAILURE", "Channel retirement failure", "IGNORE", False, "hardware"),
    162: ("", "Catalog entry without a public mnemonic", "RESET_GPU", True, "unknown"),
}
# fmt: on
# Copy engines CE10–CE19 (Xid 126–135) share one row shape.
for _i, _code in enumerate(range(126, 136), start=10):
    _CATALOG[_code] = (
        f"ROBUST_CHANNEL_CE{_i}_ERROR",
        f"Copy Engine (CE{_i}) exception",
        "RESTART_APP",
        False,
        None,
    )

# Where the old table gives no single cause, derive one from the immediate action.
_BUCKET_CAUSE = {
    "RESTART_APP": "application",
    "IGNORE": "driver",
    "RESET_GPU": "hardware",
    "RESTART_BM": "hardware",
    "CHECK_MECHANICALS": "hardware",
    "UPDATE_SWFW": "driver",
    "RESTART_VM": "system",
    "CHECK_UVM": "driver",
    "CONTACT_SUPPORT": "unknown",
    "LINKED": "unknown",
}

# Per-code detail where NVIDIA's guidance is more specific than the bucket.
_ACTION_DETAIL: dict[int, str] = {
    13: "Restart the application; Xid 13 is usually an application fault (illegal instruction/address). Run compute-sanitizer if it repeats.",
    31: "Restart the application; Xid 31 is usually an illegal memory access by the application. If it repeats across applications on one GPU, run DCGM diagnostics.",
    43: "No GPU action: the application's channel was reset after it faulted; restart or fix the application.",
    63: "No immediate action: a page was retired or a row marked for remapping; reset the GPU at the next convenient drain to activate it, and watch Xid 64.",
    79: "Drain the node and reboot it: the GPU is unreachable on PCIe. Check power, seating and thermals; repeated Xid 79 on one GPU is an RMA.",
    92: "No immediate action: corrected errors are frequent. Watch for Xid 48/63/64 and schedule service if the rate keeps rising.",
    94: "Restart the affected application: the ECC error was contained to it; other work on the GPU is unaffected. Reset the GPU at the next drain so the row is remapped.",
    95: "Drain and reset the GPU: the ECC error could not be contained, every application on the GPU is affected.",
    119: "Drain and reset the GPU (or reboot the node); update the driver if GSP timeouts recur.",
    120: "Drain and reset the GPU (or reboot the node); update the driver if GSP errors recur.",
}


@dataclass(frozen=True)
class XidEntry:
    """One Xid as NVIDIA's catalog describes it."""

    xid: int
    mnemonic: str
    title: str
    likely_cause: str
    action: str
    resolution: str
    drain_node: bool

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _build() -> dict[int, XidEntry]:
    catalog: dict[int, XidEntry] = {}
    for code, (mnemonic, title, bucket, fatal, cause) in sorted(_CATALOG.items()):
        catalog[code] = XidEntry(
            xid=code,
            mnemonic=mnemonic,
            title=title,
            likely_cause=cause or _BUCKET_CAUSE.get(bucket, "unknown"),
            action=_ACTION_DETAIL.get(code, ACTIONS[bucket]),
            resolution=bucket,
            drain_node=fatal,
        )
    return catalog


XID_CATALOG: dict[int, XidEntry] = _build()


def explain_xid(code: int | str) -> dict[str, object]:
    """{"xid", "title", "likely_cause", "action", "drain_node", "mnemonic", "resolution", "known"}.

    An Xid outside the catalog is answered, not guessed: title "unknown Xid",
    likely_cause "unknown", drain_node False, known False. A code that is not a
    non-negative integer raises ValueError naming the input.
    """
    try:
        xid = int(str(code).strip())
    except (TypeError, ValueError):
        raise ValueError(f"Xid must be a non-negative integer, got {code!r}") from None
    if xid < 0:
        raise ValueError(f"Xid must be a non-negative integer, got {code!r}")
    entry = XID_CATALOG.get(xid)
    if entry is None:
        return {
            "xid": xid,
            "title": "unknown Xid",
            "likely_cause": "unknown",
            "action": "Not in NVIDIA's Xid catalog as rcaweb knows it: look it up in NVIDIA's current Xid catalog "
            "for this driver before acting.",
            "drain_node": False,
            "mnemonic": "",
            "resolution": "",
            "known": False,
        }
    return {
        "xid": entry.xid,
        "title": entry.title,
        "likely_cause": entry.likely_cause,
        "action": entry.action,
        "drain_node": entry.drain_node,
        "mnemonic": entry.mnemonic,
        "resolution": entry.resolution,
        "known": True,
    }
