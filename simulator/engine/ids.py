"""Deterministic identifiers: same seed, same names, uids and GPU UUIDs, byte for byte.

Everything is derived with BLAKE2b from the seed and the object's identity, never
from ``uuid4``, the global ``random`` module or Python's salted ``hash()``.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

# kube's utilrand alphabet for generated name suffixes (no vowels, no confusable digits).
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def digest(seed: int, *parts: object, size: int = 16) -> bytes:
    h = hashlib.blake2b(digest_size=size, person=b"rcaweb-sim")
    h.update(str(seed).encode())
    for p in parts:
        h.update(b"\xff")
        h.update(str(p).encode())
    return h.digest()


def uid(seed: int, *parts: object) -> str:
    """A Kubernetes-style UUID (version 4 layout) derived from the parts."""
    b = bytearray(digest(seed, "uid", *parts))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def gpu_uuid(seed: int, node: str, index: int) -> str:
    h = digest(seed, "gpu", node, index).hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def name_suffix(seed: int, *parts: object, length: int = 5) -> str:
    d = digest(seed, "suffix", *parts)
    return "".join(_SUFFIX_ALPHABET[b % len(_SUFFIX_ALPHABET)] for b in d[:length])


def unit(seed: int, *parts: object) -> float:
    """A uniform number in [0, 1) from the parts: the telemetry noise source."""
    return int.from_bytes(digest(seed, "unit", *parts, size=8), "big") / 2**64


def event_name(obj: str, when: datetime, seq: int) -> str:
    """``<object>.<hex unix nanoseconds>`` as client-go's event recorder names events."""
    ns = int((when - EPOCH).total_seconds()) * 1_000_000_000 + seq
    return f"{obj}.{ns:x}"


# DGX H100 / A100 PCI bus numbers of the eight GPUs; beyond eight, a simple sequence.
_DGX_BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def pci_bus_id(index: int) -> str:
    bus = _DGX_BUSES[index] if index < len(_DGX_BUSES) else f"{0x10 + index * 0x10:02X}"
    return f"00000000:{bus}:00.0"


def rfc3339(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t else None
