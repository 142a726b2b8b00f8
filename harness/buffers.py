"""Input buffers with SPEC §2's padding, and guard-paged ones for checkasm.

Every text handed to the library has PAD readable bytes before and after it.
`Padded` is the ordinary kind (numpy).  `GuardedArena` is checkasm's: a
mapping of readable pages between two PROT_NONE pages, in which a text is
placed so that its padding touches a guard page exactly:

  place(data, "end")    back padding = PAD bytes, then the guard page
                        (catches any read past text + len + PAD)
  place(data, "start")  the guard page, then front padding = PAD bytes
                        (catches any read before text - PAD)

With `align` (0..63) the text start is moved to that offset from a 64-byte
boundary, widening the padding on the anchored side by < 64 bytes.
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np

from ._lib import ffi

PAD = 64
PAGE = mmap.PAGESIZE
PAD_BYTE = 0x99          # fill of the padding: not 0, not ASCII, not a lead byte
PROT_NONE = 0

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


class Padded:
    """A copy of `data` with PAD bytes of padding on both sides."""

    __slots__ = ("array", "ptr", "size")

    def __init__(self, data, fill: int = PAD_BYTE):
        view = memoryview(data).cast("B")
        self.size = len(view)
        self.array = np.full(self.size + 2 * PAD, fill, dtype=np.uint8)
        self.array[PAD:PAD + self.size] = np.frombuffer(view, dtype=np.uint8)
        self.ptr = ffi.cast("uint8_t *", ffi.from_buffer(self.array)) + PAD


class GuardedArena:
    """[PROT_NONE page][`pages` readable pages][PROT_NONE page]."""

    def __init__(self, max_len: int):
        self.pages = (max_len + 2 * PAD + 64 + PAGE - 1) // PAGE
        self.map = mmap.mmap(-1, (self.pages + 2) * PAGE)
        self.base = ctypes.addressof(ctypes.c_char.from_buffer(self.map))
        self.lo = PAGE                          # first readable byte
        self.hi = PAGE + self.pages * PAGE      # first byte of the back guard
        for off in (0, self.hi):
            if _libc.mprotect(self.base + off, PAGE, PROT_NONE) != 0:
                raise OSError(ctypes.get_errno(), "mprotect failed")

    def place(self, data: bytes, anchor: str = "end", align: int | None = None,
              fill: int = PAD_BYTE):
        """Copy `data` in; returns (cdata uint8_t* to the text, offset)."""
        n = len(data)
        if n + 2 * PAD + 64 > self.hi - self.lo:
            raise ValueError("text larger than the arena")
        if anchor == "end":
            off = self.hi - PAD - n
            if align is not None:
                off -= (off - align) % 64
        elif anchor == "start":
            off = self.lo + PAD
            if align is not None:
                off += align
        else:
            raise ValueError(anchor)
        lo, hi = max(self.lo, off - PAD - 64), min(self.hi, off + n + PAD + 64)
        self.map[lo:hi] = bytes([fill]) * (hi - lo)
        self.map[off:off + n] = data
        return ffi.cast("uint8_t *", self.base + off), off

    def close(self):
        for off in (0, self.hi):
            _libc.mprotect(self.base + off, PAGE, mmap.PROT_READ | mmap.PROT_WRITE)


class Packer:
    """One padded buffer (SPEC §2: PAD readable bytes before and after the text), reused
    for every batch, so each batch is one copy of its documents and no fresh pages are
    faulted in per batch. `pack(docs)` -> (pointer to the text, doc end offsets as
    uint64, text bytes). Used by training and encoding."""

    def __init__(self):
        self.array = np.empty(0, dtype=np.uint8)

    def pack(self, docs: list[bytes]):
        lengths = np.fromiter((len(d) for d in docs), dtype=np.uint64, count=len(docs))
        ends = np.cumsum(lengths, dtype=np.uint64)
        n = int(ends[-1]) if len(ends) else 0
        if len(self.array) < n + 2 * PAD:
            self.array = np.empty(0, dtype=np.uint8)          # free before growing
            self.array = np.empty(max(n + 2 * PAD, 1 << 16), dtype=np.uint8)
            self.array[:PAD] = PAD_BYTE
        view = memoryview(self.array)
        pos = PAD
        for d in docs:
            view[pos:pos + len(d)] = d
            pos += len(d)
        self.array[pos:pos + PAD] = PAD_BYTE
        ptr = ffi.cast("uint8_t *", ffi.from_buffer(self.array)) + PAD
        return ptr, ends, n
