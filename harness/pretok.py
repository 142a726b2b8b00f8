"""The assembly pre-tokenizer (SPEC §3) from Python: one library call splits a
whole buffer, Python never loops per chunk."""
from __future__ import annotations

import numpy as np

from ._lib import ffi, lib
from .buffers import Padded

_BLOCK = 1 << 22        # offsets gathered per library call


def _as_bytes(data) -> bytes | memoryview:
    if isinstance(data, str):
        return data.encode("utf-8", "surrogatepass")
    return data


def offsets_of(buf: Padded, block: int = _BLOCK) -> np.ndarray:
    """Chunk end offsets of an already padded buffer."""
    n = buf.size
    cap = max(1, min(n, block))
    parts = []
    pos = 0
    L = lib()
    while pos < n:
        out = np.empty(cap, dtype=np.uint64)
        got = L.asmbpe_split_offsets(buf.ptr, n, pos, ffi.from_buffer("uint64_t[]", out), cap, 1)
        if got < 0:
            raise RuntimeError(f"asmbpe_split_offsets failed with status {got}")
        parts.append(out[:got])
        if got < cap:
            break
        pos = int(out[got - 1])
    if not parts:
        return np.empty(0, dtype=np.uint64)
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def split_offsets(data) -> np.ndarray:
    """Chunk end offsets (uint64) of `data` (bytes, bytearray, memoryview or str)."""
    return offsets_of(Padded(_as_bytes(data)))


def split(data) -> list[bytes]:
    """The chunks of `data`, as bytes; their concatenation is `data`."""
    raw = bytes(_as_bytes(data))
    ends = split_offsets(raw).tolist()
    starts = [0] + ends[:-1]
    return [raw[s:e] for s, e in zip(starts, ends)]
