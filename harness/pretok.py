"""The assembly pre-tokenizers (SPEC §3, §10) from Python: one library call splits a
whole buffer, Python never loops per chunk.

    split_offsets(data, pretokenizer="nanochat") -> np.ndarray[uint64]   chunk end offsets
    split(data, pretokenizer="nanochat") -> list[bytes]                  the chunks

`pretokenizer` is a name or id of harness.pretokenizers (its id is what the library
takes).

Speed. The library splits English at 2 GB/s and more, so what Python does around the
call counts as much: copying the text, and above all first touching memory (the kernel
clears every new page: the offsets of 100 MB of English, 180 MB, took longer to land in
fresh pages than to compute). So nothing is allocated per call:

- the text is split where it lies when the 64 bytes after it are in the same page as its
  end (readable; the pre-tokenizers never read before the text and read at most 31
  bytes past it, whatever those hold); only a text that ends in the last 64 bytes of a
  page is copied into this thread's padded buffer (SPEC §2), which only grows
  (`_Scratch`, a threading.local; one larger than KEEP_BYTES is not kept). The copy
  cost 4.4-5 ms of 27.5-28.5 at 60 MB of English on the development VM (81-84% of
  the library call's speed) when every text was copied; split in place, 60 MB run at
  99-103% of it;
- a text of up to 1 MB (`_DIRECT_BYTES`) has its offsets written straight into the
  array returned (room for one chunk per 3 bytes, then shrunk in place: no copy; a
  text with more chunks goes on as below), and bytes of that size take a short path:
  no memoryview, no cdata cast; cffi hands the bytes' own buffer to the library and
  where it lies is id() + `_BYTES_DATA` (CPython's layout, checked against cffi at
  import; other Pythons take the general path). Over 32 MB per document, 525 to
  2,569 documents (`asmbpe bench pretok`, 2026-12-05), the public call went from 0.74
  to 0.85 and then 0.90 of the library call's speed on english, 0.68 to 0.77 and then
  0.84 on multilingual (857 MB/s), 0.57 to 0.68 and then 0.65-0.73 on code (its
  largest documents' offset arrays are fresh memory);
- otherwise the library writes the offsets into a block of `_OFFSETS`, a pool of reused memory
  (harness.buffers.Pool) sized by the text (no more chunks than bytes; English has
  about one per 4 bytes; when the block fills up, a larger one continues after the
  last chunk). A result of LEND_ITEMS offsets or more that fills at least a quarter of
  its block is that block, lent: the array returned is the caller's alone, and the block
  goes back to the pool once it and every view of it are gone (as the encoder's
  results do). Any other is an exact-size copy, so that small results do not each hold
  a block.
"""
from __future__ import annotations

import threading

import numpy as np

from ._lib import ffi, lib
from .buffers import PAD, PAD_BYTE, Padded, Pool
from .pretokenizers import DEFAULT, PRETOKENIZERS, resolve

__all__ = ["split", "split_offsets", "offsets_of", "KEEP_BYTES", "LEND_ITEMS"]

KEEP_BYTES = 512 << 20      # larger text buffers and offset blocks are not kept for reuse
LEND_ITEMS = 1 << 16        # results of at least this many offsets are lent blocks
_MIN_ROOM = 1 << 12         # offsets room for a short text
_DIRECT_BYTES = 1 << 20     # texts up to this size: offsets written into the result


class _Scratch(threading.local):
    """This thread's padded text buffer (uint8; PAD_BYTE padding in front written once)."""

    def __init__(self):
        self.text = np.empty(0, dtype=np.uint8)


_SCRATCH = _Scratch()
_OFFSETS = Pool(np.uint64, keep_bytes=KEEP_BYTES)


def _as_view(data) -> memoryview:
    """data as a flat memoryview of bytes: str as UTF-8 (lone surrogates passed through),
    bytes-like as is (C-contiguous)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return memoryview(data).cast("B")


def _padded_text(view: memoryview):
    """(uint8_t * to a padded copy of view, the array that holds it) in this thread's
    text buffer, grown when too small."""
    n = len(view)
    text = _SCRATCH.text
    if len(text) < n + 2 * PAD:
        _SCRATCH.text = text = None                                  # free before growing
        text = np.empty(n + n // 8 + 2 * PAD, dtype=np.uint8)
        text[:PAD] = PAD_BYTE
        _SCRATCH.text = text if text.nbytes <= KEEP_BYTES else np.empty(0, dtype=np.uint8)
    text[PAD:PAD + n] = np.frombuffer(view, dtype=np.uint8)
    text[PAD + n:PAD + n + PAD] = PAD_BYTE
    return ffi.cast("uint8_t *", ffi.from_buffer(text)) + PAD, text


def _offsets(ptr, n: int, pretok: int, block: int | None = None) -> np.ndarray:
    """Chunk end offsets of the padded text ptr[0, n) under pre-tokenizer id `pretok`,
    an array of the caller's own. block: at most this many offsets per library call
    (tests; default: as many as there is room for)."""
    if n == 0:
        return np.empty(0, dtype=np.uint64)
    L = lib()
    if n <= _DIRECT_BYTES and block is None:
        # a short text: the offsets go straight into the array returned, shrunk in place
        # to what was written (no copy), unless they outgrow it (then as below)
        room = min(n, n // 3 + 64)
        out = np.empty(room, dtype=np.uint64)
        got = L.asmbpe_split_offsets(ptr, n, 0, ffi.cast("uint64_t *", ffi.from_buffer(out)),
                                     room, pretok)
        if got < 0:
            raise RuntimeError(f"asmbpe_split_offsets failed with status {got}")
        if got < room or int(out[room - 1]) >= n:
            out.resize(got, refcheck=False)
            return out
    # chunks <= bytes; most text has far fewer (English: about one per 4 bytes)
    out = _OFFSETS.take(min(n, max(n // 3, _MIN_ROOM)))
    total = pos = 0
    try:
        while True:
            cap = min(len(out), n) - total
            if block is not None:
                cap = min(cap, block)
            got = L.asmbpe_split_offsets(ptr, n, pos,
                                         ffi.cast("uint64_t *", ffi.from_buffer(out)) + total,
                                         cap, pretok)
            if got < 0:
                raise RuntimeError(f"asmbpe_split_offsets failed with status {got}")
            total += got
            if got < cap:
                break
            pos = int(out[total - 1])
            if pos >= n:
                break
            if total == len(out):               # full: a larger block, what is written kept
                full, out = out, _OFFSETS.take(min(n, 2 * len(out)))
                out[:total] = full[:total]
                _OFFSETS.give_back(full)
        if total >= LEND_ITEMS and 4 * total >= len(out):
            result, out = _OFFSETS.lend(out, total), None
        else:
            result = np.array(out[:total])
    finally:
        if out is not None:
            _OFFSETS.give_back(out)
    return result


def offsets_of(buf: Padded, block: int | None = None, pretokenizer=DEFAULT) -> np.ndarray:
    """Chunk end offsets of an already padded buffer (block: see _offsets)."""
    return _offsets(buf.ptr, buf.size, resolve(pretokenizer).id, block)


_IDS = {p.name: p.id for p in PRETOKENIZERS}
_PAGE = 4096
_READ_AFTER = 64            # the pre-tokenizers read at most 31 bytes past the text


def _in_place(view: memoryview):
    """(uint8_t * to view's own bytes, view) when the _READ_AFTER bytes after them lie in
    the same page as their last byte, so are mapped and readable (the pre-tokenizers never
    read before the text, nor depend on what they read past it); else None."""
    n = len(view)
    if n == 0:
        return None
    ptr = ffi.from_buffer(view)
    if not _readable_after(ptr, n):
        return None
    return ffi.cast("uint8_t *", ptr), ptr


def _readable_after(ptr, n: int) -> bool:
    """The _READ_AFTER bytes after ptr[0, n) lie in the page of its last byte."""
    end = int(ffi.cast("uintptr_t", ptr)) + n
    return (end - 1) // _PAGE == (end + _READ_AFTER - 1) // _PAGE


def _bytes_data_offset() -> int | None:
    """Where a bytes object's buffer lies from its id() (CPython: 32 bytes on), checked
    against cffi's own view of it; None where that does not hold (another Python)."""
    probe = bytes(range(48))
    try:
        at = int(ffi.cast("uintptr_t", ffi.from_buffer(probe))) - id(probe)
    except (TypeError, ValueError):
        return None
    return at if 0 < at <= 64 else None


_BYTES_DATA = _bytes_data_offset()


def split_offsets(data: bytes | bytearray | memoryview | str,
                  pretokenizer: str | int = DEFAULT) -> np.ndarray:
    """Chunk end offsets (uint64) of `data` (bytes, bytearray, memoryview or str, as
    UTF-8 with lone surrogates passed through) under `pretokenizer` (a name or id of
    harness.pretokenizers); the last one is the length; empty for empty data.

    The text is split where it lies when the bytes after it are readable (nearly always:
    unless it ends in the last 64 bytes of a page), else from this thread's padded copy."""
    pretok = _IDS.get(pretokenizer) if isinstance(pretokenizer, str) else None
    if pretok is None:
        pretok = resolve(pretokenizer).id
    n = len(data)
    if type(data) is bytes and 0 < n <= _DIRECT_BYTES:
        if _BYTES_DATA is not None:
            # the common call, made short: bytes go to the library as they are (cffi
            # passes their own buffer), where they lie is id() + _BYTES_DATA, and the
            # offsets go straight into the array returned
            end = id(data) + _BYTES_DATA + n
            if (end - 1) // _PAGE == (end + _READ_AFTER - 1) // _PAGE:
                room = min(n, n // 3 + 64)
                out = np.empty(room, dtype=np.uint64)
                got = lib().asmbpe_split_offsets(data, n, 0, ffi.from_buffer("uint64_t[]", out),
                                                 room, pretok)
                if got < 0:
                    raise RuntimeError(f"asmbpe_split_offsets failed with status {got}")
                if got < room or int(out[room - 1]) >= n:
                    out.resize(got, refcheck=False)
                    return out
        else:
            ptr = ffi.from_buffer(data)
            if _readable_after(ptr, n):
                return _offsets(ffi.cast("uint8_t *", ptr), n, pretok)
    view = _as_view(data)
    try:
        direct = _in_place(view)
        ptr, keep = direct or _padded_text(view)
        try:
            return _offsets(ptr, len(view), pretok)
        finally:
            if direct:          # the buffer export ends here, also when the call raises
                ffi.release(keep)   # (an export a traceback keeps alive would stop the
            del keep                # garbage collector from clearing the memoryview)
    finally:
        view.release()


def split(data: bytes | bytearray | memoryview | str,
          pretokenizer: str | int = DEFAULT) -> list[bytes]:
    """The chunks of `data` under `pretokenizer`, as bytes; their concatenation is
    `data` (str as UTF-8, lone surrogates passed through)."""
    raw = _as_view(data).tobytes()
    ends = split_offsets(raw, pretokenizer).tolist()
    starts = [0] + ends[:-1]
    return [raw[s:e] for s, e in zip(starts, ends)]
