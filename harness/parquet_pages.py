"""Streaming one Parquet column chunk of plain strings page by page, decompressed as it
is taken, so that the first documents of a row group come out before its pages are
decompressed whole (docs/OPTIMIZATION_LOG.md, E62: english.parquet's first row group
opens with a page of 1,024 documents, 45 MB decompressed, which pyarrow decompresses
whole, 0.065-0.08 s, before its first batch; here the first 4 MB of documents come
out after about 4 MB).

Only the simplest layout is read here, the one pyarrow writes for a text column
without a dictionary: BYTE_ARRAY values, PLAIN encoding, data pages v1 or v2, no
repetition levels, no nulls, ZSTD / GZIP / no compression. `row_group_arrays` hands
every other column chunk, and whatever part of one this reader cannot take (a
dictionary page, a null, anything it does not expect), to pyarrow, skipping the rows
already given: the rows that come out are always pyarrow's rows. Page headers are
read as strictly as Thrift reads them, and a page must end where its header says,
so that a damaged page is refused here where pyarrow refuses it
(tests/test_parquet_pages.py damages files at random and compares).
"""
from __future__ import annotations

import os
import struct

__all__ = ["row_group_arrays"]

READ_BYTES = 1 << 20                # decompressed bytes taken from a page at a time
ARRAY_BYTES = 4 << 20               # an array ends with the value that reaches this
                                    # (a block of the encoder is 8 MB: the first comes
                                    # out after 8 MB, not after 256 long documents)
_CODECS = {"ZSTD": "zstd", "GZIP": "gzip", "UNCOMPRESSED": None}
_DATA_PAGE, _DATA_PAGE_V2 = 0, 3    # PageType
_PLAIN, _RLE = 0, 3                 # Encoding


class _Unsupported(Exception):
    """A layout this reader leaves to pyarrow."""


def row_group_arrays(p, pf, g: int, column: str, batch_rows: int):
    """The column of row group g of ParquetFile pf (at path p) as Arrow arrays of up
    to batch_rows rows, decoded as they are taken. Plain strings are streamed here
    (binary arrays); anything else, and the rest of a chunk this reader stops on, is
    read by pyarrow (`ParquetFile.iter_batches`), whose errors are the ones raised."""
    done = 0
    try:
        for array in _plain_strings(p, pf, g, column, batch_rows):
            done += len(array)
            yield array
        return
    except MemoryError:                 # pyarrow would need as much again
        raise
    except Exception:                   # _Unsupported, or damage pyarrow will name
        pass
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[g], columns=[column],
                                 use_threads=False):
        array = batch.column(0)
        if done >= len(array):
            done -= len(array)
            continue
        if done:
            array, done = array.slice(done), 0
        yield array


def _plain_strings(p, pf, g: int, column: str, batch_rows: int):
    import pyarrow as pa

    md = pf.metadata
    leaves = [c for c in range(md.num_columns)
              if md.row_group(g).column(c).path_in_schema == column]
    if len(leaves) != 1:
        raise _Unsupported("not one leaf column")
    chunk = md.row_group(g).column(leaves[0])
    leaf = pf.schema.column(leaves[0])
    arrow_type = pf.schema_arrow.field(column).type
    large = pa.types.is_large_string(arrow_type) or pa.types.is_large_binary(arrow_type)
    if not (large or pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type)):
        raise _Unsupported("not strings")
    if (leaf.physical_type != "BYTE_ARRAY" or leaf.max_repetition_level != 0
            or leaf.max_definition_level > 1 or chunk.has_dictionary_page
            or chunk.compression not in _CODECS):
        raise _Unsupported("layout")
    codec = _CODECS[chunk.compression]
    optional = leaf.max_definition_level == 1
    rows = md.row_group(g).num_rows
    start = chunk.data_page_offset
    with pa.memory_map(os.fspath(p)) as f:  # pages are decompressed from the page cache
        f.seek(start)
        data = memoryview(f.read_buffer(chunk.total_compressed_size)).cast("B")
        pos = got = 0
        while got < rows:
            header, pos = _thrift_struct(data, pos)       # IndexError past the end
            kind, page_bytes, size = _required(header, _I32, 1, 2, 3)
            if not 0 <= size <= len(data) - pos or page_bytes < 0:
                raise _Unsupported("a page size out of its chunk")
            values = _page_values(header, kind, page_bytes, data[pos:pos + size], codec,
                                  optional, large)
            pos += size
            if not 0 <= values.count <= rows - got:
                raise _Unsupported("a value count out of range")
            while values.left:
                yield values.array(batch_rows)
            values.finish()
            got += values.count


def _page_values(header: dict, kind: int, page_bytes: int, page: memoryview, codec,
                 optional: bool, large: bool) -> "_Values":
    import pyarrow as pa

    if kind == _DATA_PAGE:
        n, encoding, def_encoding, _ = _required(_struct(header, 5), _I32, 1, 2, 3, 4)
        if encoding != _PLAIN:
            raise _Unsupported("not PLAIN")
        body = (pa.CompressedInputStream(pa.py_buffer(page), codec) if codec
                else pa.BufferReader(page))
        values = _Values(body, n, large, page_bytes)
        if optional:                    # 4-byte length, then the levels: all 1s?
            if def_encoding != _RLE:
                raise _Unsupported("levels not RLE")
            ones = _rle_ones(n)
            (size,) = struct.unpack("<I", values.take_bytes(4))
            if size != len(ones) or values.take_bytes(size) != ones:
                raise _Unsupported("nulls")
        return values
    if kind == _DATA_PAGE_V2:
        dph = _struct(header, 8)
        n, nulls, rows, encoding, def_bytes, rep_bytes = _required(dph, _I32, 1, 2, 3, 4,
                                                                   5, 6)
        if encoding != _PLAIN or nulls != 0 or rep_bytes != 0 or rows != n:
            raise _Unsupported("not PLAIN without nulls")
        levels = _rle_ones(n) if optional else b""      # (no length before them)
        if def_bytes != len(levels) or bytes(page[:def_bytes]) != levels:
            raise _Unsupported("nulls")         # (levels are never compressed)
        rest = page[def_bytes:]
        compressed = _typed(dph, 7, _BOOL)
        body = (pa.CompressedInputStream(pa.py_buffer(rest), codec)
                if codec and compressed is not False else pa.BufferReader(rest))
        return _Values(body, n, large, page_bytes - def_bytes)
    raise _Unsupported(f"page type {kind}")


def _rle_ones(n: int) -> bytes:
    """n definition levels of 1 (bit width 1) as one RLE run: varint(n << 1), then 1."""
    out, v = bytearray(), n << 1
    while v >= 0x80:
        out.append(v & 0x7F | 0x80)
        v >>= 7
    out.append(v)
    out.append(1)
    return bytes(out)


class _Values:
    """A page's PLAIN values (4-byte length, then the bytes), taken from its
    decompressing stream a piece at a time."""

    def __init__(self, stream, count: int, large: bool, page_bytes: int):
        self.stream = stream
        self.large = large              # large_binary arrays (64-bit offsets), as
                                        # the column's type: else binary ones
        self.page_bytes = page_bytes    # the stream's size decompressed: no value is
                                        # longer (a damaged length reads no further)
        self.taken = 0
        self.count = self.left = count
        self.piece = memoryview(b"")
        self.at = 0

    def _take(self, n: int) -> list:
        """The next n bytes, as views of the pieces read (no copy)."""
        parts = []
        while n:
            if self.at == len(self.piece):
                self.piece = memoryview(self.stream.read(max(READ_BYTES, n)))
                self.at = 0
                if not len(self.piece):
                    raise _Unsupported("page ends early")
            k = min(n, len(self.piece) - self.at)
            parts.append(self.piece[self.at:self.at + k])
            self.at += k
            self.taken += k
            n -= k
        return parts

    def finish(self) -> None:
        """After the last value: the page must end there, at the size its header
        gives, and its stream must end cleanly (read to its end, so that a
        decompressor checks what it checks at the end of a frame)."""
        if (self.taken != self.page_bytes or self.at != len(self.piece)
                or len(self.stream.read(1))):
            raise _Unsupported("the page does not end after its values")

    def take_bytes(self, n: int) -> bytes:
        return b"".join(self._take(n))

    def array(self, rows: int):
        """The next values, up to `rows` of them or the first to reach ARRAY_BYTES, as
        one binary Arrow array (one copy of their bytes)."""
        import numpy as np
        import pyarrow as pa

        rows = min(rows, self.left)
        parts, ends, total = [], np.empty(rows + 1, dtype=np.int64), 0
        ends[0] = 0
        for k in range(rows):
            (size,) = struct.unpack("<I", self.take_bytes(4))
            if size > self.page_bytes - self.taken:
                raise _Unsupported("a value longer than its page")
            parts += self._take(size)
            total += size
            ends[k + 1] = total
            if total >= ARRAY_BYTES:
                rows = k + 1
                ends = ends[:rows + 1]
                break
        self.left -= rows
        if self.large:
            kind, offsets = pa.large_binary(), ends
        elif total < 1 << 31:
            kind, offsets = pa.binary(), ends.astype(np.int32)
        else:                           # one value of 2 GB or more: not a binary array
            raise _Unsupported("a value too long for 32-bit offsets")
        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(b"".join(parts))])


# Thrift compact protocol: just enough to read a PageHeader (a struct of ints, structs,
# binaries and lists), every field kept by its id with its type, as strict as
# Thrift's own reader (varints of at most 5 / 10 bytes, no negative sizes, required
# fields of their types): a header pyarrow refuses is refused here too, and pyarrow
# then names it.

_BOOL, _I32, _STRUCT = 1, 5, 12         # compact types (a bool is 1 or 2)


def _typed(d: dict, fid: int, kind: int):
    """Field fid's value if it is there with the type Thrift's generated reader
    expects (it skips a field of another type), else None."""
    k, v = d.get(fid, (None, None))
    return v if k == kind or (kind == _BOOL and k == 2) else None


def _required(d: dict, kind: int, *fids: int) -> list:
    """The values of required fields of one type; a struct without one of them is
    refused (as Thrift's generated reader refuses it)."""
    values = [_typed(d, f, kind) for f in fids]
    if None in values:
        raise _Unsupported("a required field missing")
    return values


def _struct(d: dict, fid: int) -> dict:
    v = _typed(d, fid, _STRUCT)
    if v is None:
        raise _Unsupported("no page header of its type")
    return v


def _varint(b, i: int, bits: int = 32):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            if r >> bits:
                raise _Unsupported("a varint out of range")
            return r, i
        if s >= bits + 7:
            raise _Unsupported("a varint too long")


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _size(b, i: int):
    n, i = _varint(b, i)
    if n >> 31:
        raise _Unsupported("a negative size")
    return n, i


def _thrift_struct(b, i: int):
    out, fid = {}, 0
    while True:
        h = b[i]
        i += 1
        if h == 0:
            return out, i
        kind, delta = h & 15, h >> 4
        if delta:
            fid += delta
        else:
            v, i = _varint(b, i, 16)
            fid = _zigzag(v)
        value, i = _thrift_value(b, i, kind)
        out[fid] = (kind, value)


def _thrift_value(b, i: int, kind: int):
    if kind in (1, 2):                  # bool in the field header
        return kind == 1, i
    if kind == 3:
        return b[i], i + 1
    if kind in (4, 5, 6):               # zigzag varints: i16, i32, i64
        v, i = _varint(b, i, (16, 32, 64)[kind - 4])
        return _zigzag(v), i
    if kind == 7:
        if i + 8 > len(b):
            raise IndexError
        return struct.unpack_from("<d", b, i)[0], i + 8
    if kind == 8:
        n, i = _size(b, i)
        if i + n > len(b):
            raise IndexError
        return bytes(b[i:i + n]), i + n
    if kind in (9, 10):                 # list, set
        h = b[i]
        i += 1
        n, elem = h >> 4, h & 15
        if n == 15:
            n, i = _size(b, i)
        if not 1 <= elem <= 12:
            raise _Unsupported(f"thrift type {elem}")
        out = []
        for _ in range(n):
            if elem in (1, 2):          # bools in a list: one byte each
                out.append(b[i] == 1)
                i += 1
            else:
                v, i = _thrift_value(b, i, elem)
                out.append(v)
        return out, i
    if kind == 12:
        return _thrift_struct(b, i)
    raise _Unsupported(f"thrift type {kind}")
