"""Input buffers with SPEC §2's padding, guard-paged ones for checkasm, and the pools of
reused memory (`Pool`).

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

import array
import ctypes
import mmap
import threading
import weakref

from ._lazy import lazy_numpy

from ._lib import ffi

np = lazy_numpy(globals())    # numpy imported on first use (harness/_lazy.py)

PAD = 64
PAGE = mmap.PAGESIZE
PAD_BYTE = 0x99          # fill of the padding: not 0, not ASCII, not a lead byte
PROT_NONE = 0

_PADDING = bytes([PAD_BYTE]) * PAD
_malloc = ffi.new_allocator(should_clear_after_alloc=False)


def _uninitialized(size: int) -> memoryview:
    """A writable uint8 memoryview of `size` bytes from malloc, not cleared (as
    np.empty: glibc hands a freed batch's pages to the next one), without numpy."""
    return memoryview(ffi.buffer(_malloc("uint8_t[]", size)))


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


class Pool:
    """Blocks of memory (numpy arrays of one dtype) that the process's calls use again
    instead of fresh pages: on some machines first touching new pages costs more than
    the work that writes them (the kernel clears each new page). The encoder keeps its
    output rooms and results in pools (harness.encoder), the pre-tokenizer its
    offsets (harness.pretok).

    `take(n)` gives a block of at least n items for the caller alone until it is given
    back (`give_back`), or lent out (`lend`: a result array that gives the block back
    when it and every view of it are gone). A new block is a quarter larger than asked,
    so that calls of about the same size reuse one instead of first touching a new one
    each time one is a little larger (docs/OPTIMIZATION_LOG.md, E53). One free block is
    kept (the largest given back) as long as the process lives; with `keep_bytes`,
    only when it is no larger than that."""

    KEEP = 1                                # free blocks kept (the largest)
    MIN_ITEMS = 1 << 16                     # the smallest block made

    def __init__(self, dtype, keep_bytes: int | None = None):
        self.dtype = np.dtype(dtype)
        self.keep_bytes = keep_bytes
        self.lock = threading.Lock()
        self.free: list[np.ndarray] = []

    def take(self, n: int) -> np.ndarray:
        """A block of at least n items, for the caller alone until it is given back."""
        with self.lock:
            block = self.free.pop() if self.free else None
        if block is None or len(block) < n:
            block = None                    # (a smaller one goes before the new one)
            block = np.empty(max(n + n // 4, self.MIN_ITEMS), dtype=self.dtype)
        return block

    def give_back(self, block: np.ndarray, wait: bool = True) -> None:
        """block is free again. wait=False (a result's finalizer, which may run from
        a garbage collection inside this pool's own lock): drop the block instead
        of waiting for the lock."""
        if self.keep_bytes is not None and block.nbytes > self.keep_bytes:
            return
        if not self.lock.acquire(blocking=wait):
            return
        try:
            self.free.append(block)
            self.free.sort(key=len)
            del self.free[:-self.KEEP]
        finally:
            self.lock.release()

    def lend(self, block: np.ndarray, n: int) -> np.ndarray:
        """block[:n] as an array of its own whose memory comes back to this pool
        when it and every view of it are gone (a cffi finalizer on the pointer the
        array's buffer keeps alive; block itself stays alive through it)."""
        keeper = ffi.gc(ffi.cast("uint8_t *", block.ctypes.data),
                        lambda _p, b=block: self.give_back(b, wait=False))
        return np.frombuffer(ffi.buffer(keeper, self.dtype.itemsize * n), dtype=self.dtype)


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
              fill: int = PAD_BYTE, pad: int = PAD):
        """Copy `data` in, `pad` bytes from the guard page it is anchored to (0: touching
        it); returns (cdata uint8_t* to the text, offset)."""
        n = len(data)
        if n + 2 * PAD + 64 > self.hi - self.lo:
            raise ValueError("text larger than the arena")
        if anchor == "end":
            off = self.hi - pad - n
            if align is not None:
                off -= (off - align) % 64
        elif anchor == "start":
            off = self.lo + pad
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


class PackedBatch:
    """Documents already laid out as the library takes them (what Packer.pack makes):
    `array` (a writable uint8 memoryview) holds PAD bytes, the text (`nbytes`), PAD
    bytes; `ends` their end offsets (an array.array of uint64). Made by PackedBuilder,
    where the reader writes each document straight from its decompressed page (no
    other copy of the text). Neither is numpy: training never imports it
    (harness/_lazy.py)."""

    __slots__ = ("array", "ends", "nbytes")

    def __init__(self, array: memoryview, ends: array.array, nbytes: int):
        self.array, self.ends, self.nbytes = array, ends, nbytes

    def __len__(self) -> int:
        return len(self.ends)


class PackedBuilder:
    """Lays documents out into a PackedBatch: `room(n)` is a writable view of the next n
    bytes, `end_doc(n)` takes them as one document (a document that fails half-way is
    simply not taken), `add(doc)` does both; `full` once `target` bytes are in, `take()`
    hands the batch over and starts the next. The buffer is made target plus a slack
    large, and grows (one copy) only for a document that does not fit."""

    SLACK = 1 << 20
    BUFFERS = 2             # batches alive at once (one counted, one filled) ...
    WAIT_S = 2.0            # ... waited for this long at most (a soft bound: a
                            # consumer that stops early never leaves the reader stuck)

    def __init__(self, target: int):
        self.target = max(1, int(target))
        self._buffers = threading.Semaphore(self.BUFFERS)
        self.array = None               # the batch's buffer (_uninitialized)
        self.pos = PAD
        self.ends: list[int] = []
        self.added = 0                  # documents taken, all batches together
        self._release = None            # gives the batch's buffer back to the count

    def room(self, n: int) -> memoryview:
        need = self.pos + n + PAD
        if self.array is None or need > len(self.array):
            size = max(need, 2 * PAD + self.target + self.SLACK)
            if self.array is not None:
                size = max(size, len(self.array) + len(self.array) // 2)
            if self.array is None:              # a new batch: wait until one of
                got = self._buffers.acquire(timeout=self.WAIT_S)  # the last is gone
                self._release = self._buffers.release if got else None
                new = _uninitialized(size)
                new[:PAD] = _PADDING
            else:                               # a document that does not fit
                new = _uninitialized(size)
                new[:self.pos] = self.array[:self.pos]
            self.array = new
        return self.array[self.pos:self.pos + n]

    def end_doc(self, n: int) -> None:
        self.pos += n
        self.ends.append(self.pos - PAD)
        self.added += 1

    def add(self, doc) -> None:
        n = len(doc)
        self.room(n)[:] = doc
        self.end_doc(n)

    @property
    def nbytes(self) -> int:
        return self.pos - PAD

    @property
    def full(self) -> bool:
        return self.pos - PAD >= self.target

    def __len__(self) -> int:
        return len(self.ends)

    def take(self) -> PackedBatch:
        if self.array is None:
            self.room(0)
        self.array[self.pos:self.pos + PAD] = _PADDING
        out = PackedBatch(self.array, array.array("Q", self.ends), self.pos - PAD)
        if self._release is not None:           # its buffer counts until it is gone
            weakref.finalize(self.array, self._release)
            self._release = None
        self.array, self.pos, self.ends = None, PAD, []
        return out


class Packer:
    """One padded buffer (SPEC §2: PAD readable bytes before and after the text), reused
    for every batch, so each batch is one copy of its documents and no fresh pages are
    faulted in per batch. `pack(docs)` -> (pointer to the text, doc end offsets as
    uint64, text bytes); the pointer is valid until the next pack. A PackedBatch is
    not copied: its buffer is taken (and kept until the next pack). Used by training
    and encoding."""

    def __init__(self):
        self.array = None

    def pack(self, docs):
        if isinstance(docs, PackedBatch):       # laid out already: no copy; kept
            self.array = docs.array             # alive (the pointer does not) until
            ptr = ffi.cast("uint8_t *", ffi.from_buffer(self.array)) + PAD  # the next
            return ptr, docs.ends, docs.nbytes  # pack
        if isinstance(docs, TextBatch):
            ends, n = docs.ends, docs.nbytes
        else:
            lengths = np.fromiter((len(d) for d in docs), dtype=np.uint64, count=len(docs))
            ends = np.cumsum(lengths, dtype=np.uint64)
            n = int(ends[-1]) if len(ends) else 0
        if self.array is None or len(self.array) < n + 2 * PAD:
            self.array = None                                 # free before growing
            self.array = np.empty(max(n + 2 * PAD, 1 << 16), dtype=np.uint8)
            self.array[:PAD] = PAD_BYTE
        if isinstance(docs, TextBatch):
            pos = PAD
            for data, _ in docs.parts:
                self.array[pos:pos + len(data)] = data
                pos += len(data)
        else:
            view = memoryview(self.array)
            pos = PAD
            for d in docs:
                view[pos:pos + len(d)] = d
                pos += len(d)
        self.array[pos:pos + PAD] = PAD_BYTE
        ptr = ffi.cast("uint8_t *", ffi.from_buffer(self.array)) + PAD
        return ptr, ends, n


def doc_pointers(docs):
    """The documents where they lie, for asmbpe_encode_docs (no copy): (uint8_t ** to
    one pointer per document, their end offsets as if joined (uint64), total bytes,
    the objects that must stay alive during the call). docs: a TextBatch (pointers
    into its parts, computed with numpy) or a list of bytes-like documents."""
    if isinstance(docs, TextBatch):
        ptrs, keep = [], []
        for data, ends in docs.parts:
            base = int(ffi.cast("uintptr_t", ffi.from_buffer("uint8_t[]", data)))
            starts = np.empty(len(ends), dtype=np.uint64)
            starts[0] = 0
            starts[1:] = ends[:-1]
            ptrs.append(starts + np.uint64(base))
            keep.append(data)
        table = np.concatenate(ptrs) if ptrs else np.zeros(0, np.uint64)
        keep.append(table)
        return (ffi.cast("uint8_t **", ffi.from_buffer("uint64_t[]", table)), docs.ends,
                docs.nbytes, keep)
    offset = _bytes_data_offset()
    if offset and set(map(type, docs)) == {bytes}:
        # each bytes object's data lies at a fixed offset from its address (CPython's
        # id): the table without a cffi object per document (log E70)
        table = np.fromiter(map(id, docs), dtype=np.uint64, count=len(docs))
        table += np.uint64(offset)
        ends = np.cumsum(np.fromiter(map(len, docs), dtype=np.uint64, count=len(docs)),
                         dtype=np.uint64)
        return (ffi.cast("uint8_t **", ffi.from_buffer("uint64_t[]", table)), ends,
                int(ends[-1]) if len(ends) else 0, (docs, table))
    bufs = [ffi.from_buffer("uint8_t[]", d) for d in docs]
    ends = np.cumsum(np.fromiter(map(len, bufs), dtype=np.uint64, count=len(bufs)),
                     dtype=np.uint64)
    table = ffi.new("uint8_t *[]", bufs)
    return table, ends, int(ends[-1]) if len(ends) else 0, (bufs, table)


_BYTES_OFFSET: list[int] = []


def _bytes_data_offset() -> int:
    """Where a bytes object's data starts, from its id(): on CPython a fixed offset
    (the object header), found once by asking cffi for the data of bytes objects of
    several lengths; 0 where ids are not addresses or the offsets disagree (then
    doc_pointers asks cffi for every document)."""
    if not _BYTES_OFFSET:
        probes = [bytes(range(n % 256)) * (1 + n // 256) for n in (1, 7, 64, 300, 5000)]
        found = {int(ffi.cast("uintptr_t", ffi.from_buffer("uint8_t[]", b))) - id(b)
                 for b in probes}
        offset = found.pop() if len(found) == 1 else 0
        _BYTES_OFFSET.append(offset if 0 < offset <= 64 else 0)
    return _BYTES_OFFSET[0]


class TextBatch:
    """Documents as contiguous uint8 arrays plus end offsets: the layout of Arrow binary
    columns, kept as is, so a Parquet batch reaches the library with one copy (into the
    Packer's buffer) and no Python object per document. `parts` is a list of (data
    uint8, ends uint64, offsets within that part) pieces; joining batches only joins
    the lists. A read-only sequence of bytes (`batch[i]`) for everything else."""

    __slots__ = ("parts", "_ends")

    def __init__(self, data: np.ndarray, ends: np.ndarray):
        self.parts = [(data, ends)] if len(ends) else []
        self._ends = None

    @classmethod
    def from_arrow(cls, arr) -> "TextBatch":
        """From a pyarrow (large_)binary or (large_)string array; nulls are dropped."""
        if arr.null_count:
            arr = arr.filter(arr.is_valid())
        n = len(arr)
        if n == 0:
            return cls(np.zeros(0, np.uint8), np.zeros(0, np.uint64))
        bufs = arr.buffers()
        wide = arr.type.id in (_arrow_ids()["large"])
        offsets = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32)
        offsets = offsets[arr.offset:arr.offset + n + 1]
        first, last = int(offsets[0]), int(offsets[-1])
        data = (np.frombuffer(bufs[2], dtype=np.uint8)[first:last] if bufs[2] is not None
                else np.zeros(0, np.uint8))
        return cls(data, (offsets[1:] - first).astype(np.uint64))

    @classmethod
    def concat(cls, batches: list) -> "TextBatch":
        out = cls(np.zeros(0, np.uint8), np.zeros(0, np.uint64))
        out.parts = [p for b in batches for p in b.parts]
        return out

    @property
    def nbytes(self) -> int:
        return sum(len(d) for d, _ in self.parts)

    @property
    def ends(self) -> np.ndarray:
        """End offsets of the documents in the joined text (uint64)."""
        if self._ends is None:
            shifts = np.cumsum([0] + [len(d) for d, _ in self.parts[:-1]], dtype=np.uint64)
            self._ends = (np.concatenate([e + s for (_, e), s in zip(self.parts, shifts)])
                          if self.parts else np.zeros(0, np.uint64))
        return self._ends

    def split(self, k: int) -> tuple["TextBatch", "TextBatch"]:
        """(the first k documents, the rest), as views; a one-part batch only."""
        (data, ends), = self.parts
        cut = int(ends[k - 1]) if k else 0
        return (TextBatch(data[:cut], ends[:k]),
                TextBatch(data[cut:], ends[k:] - np.uint64(cut)))

    def __len__(self) -> int:
        return sum(len(e) for _, e in self.parts)

    def __iter__(self):
        for data, ends in self.parts:
            start = 0
            for end in ends.tolist():
                yield data[start:end].tobytes()
                start = end

    def __getitem__(self, i: int) -> bytes:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        i %= n
        for data, ends in self.parts:
            if i < len(ends):
                start = int(ends[i - 1]) if i else 0
                return data[start:int(ends[i])].tobytes()
            i -= len(ends)


def _arrow_ids() -> dict:
    import pyarrow as pa
    return {"large": (pa.large_binary().id, pa.large_string().id)}


def batch_bytes_of(docs) -> int:
    """Text bytes of a batch: a TextBatch or a list of bytes."""
    return (docs.nbytes if isinstance(docs, (TextBatch, PackedBatch))
            else sum(map(len, docs)))
