"""Streaming one Parquet column chunk of plain strings page by page, decompressed as it
is taken, so that the first documents of a row group come out before its pages are
decompressed whole (docs/OPTIMIZATION_LOG.md, E62: english.parquet's first row group
is one 45 MB page that pyarrow decompresses whole, 0.065-0.08 s, before its first
batch; here the first 256 documents come out after about 6 MB).

Only the simplest layout is read here, the one pyarrow writes for a text column
without a dictionary: BYTE_ARRAY values, PLAIN encoding, data pages v1 or v2, no
repetition levels, no nulls, ZSTD / GZIP / no compression. `row_group_arrays` hands
every other column chunk, and whatever part of one this reader cannot take (a
dictionary page, a null, anything it does not expect), to pyarrow, skipping the rows
already given: the rows that come out are always pyarrow's rows.
"""
from __future__ import annotations

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
    kind = pf.schema_arrow.field(column).type
    if not (pa.types.is_string(kind) or pa.types.is_binary(kind)
            or pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)):
        raise _Unsupported("not strings")
    if (leaf.physical_type != "BYTE_ARRAY" or leaf.max_repetition_level != 0
            or leaf.max_definition_level > 1 or chunk.has_dictionary_page
            or chunk.compression not in _CODECS):
        raise _Unsupported("layout")
    codec = _CODECS[chunk.compression]
    large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
    optional = leaf.max_definition_level == 1
    rows = md.row_group(g).num_rows
    start = chunk.data_page_offset
    with pa.memory_map(str(p)) as f:    # pages are decompressed from the page cache
        f.seek(start)
        data = memoryview(f.read_buffer(chunk.total_compressed_size)).cast("B")
        pos = got = 0
        while got < rows:
            header, pos = _thrift_struct(data, pos)       # IndexError past the end
            size = header[3]
            if pos + size > len(data):
                raise _Unsupported("the chunk ends in a page")
            values = _page_values(header, data[pos:pos + size], codec, optional, large)
            pos += size
            if got + values.count > rows:
                raise _Unsupported("more values than rows")
            while values.left:
                yield values.array(batch_rows)
            got += values.count


def _page_values(header: dict, page: memoryview, codec, optional: bool,
                 large: bool) -> "_Values":
    import pyarrow as pa

    kind = header.get(1)
    if kind == _DATA_PAGE:
        dph = header[5]
        if dph.get(2) != _PLAIN:
            raise _Unsupported("not PLAIN")
        n = dph[1]
        body = (pa.CompressedInputStream(pa.py_buffer(page), codec) if codec
                else pa.BufferReader(page))
        values = _Values(body, n, large)
        if optional:                    # 4-byte length, then the levels: all 1s?
            if dph.get(3) != _RLE:
                raise _Unsupported("levels not RLE")
            (size,) = struct.unpack("<I", values.take_bytes(4))
            if values.take_bytes(size) != _rle_ones(n):
                raise _Unsupported("nulls")
        return values
    if kind == _DATA_PAGE_V2:
        dph = header[8]
        if dph.get(4) != _PLAIN or dph.get(2, 0) != 0 or dph.get(6, 0) != 0:
            raise _Unsupported("not PLAIN without nulls")
        skip = dph.get(5, 0) + dph.get(6, 0)          # levels: never compressed
        rest = page[skip:]
        body = (pa.CompressedInputStream(pa.py_buffer(rest), codec)
                if codec and dph.get(7, True) else pa.BufferReader(rest))
        return _Values(body, dph[1], large)
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

    def __init__(self, stream, count: int, large: bool):
        self.stream = stream
        self.large = large              # large_binary arrays (64-bit offsets)
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
            n -= k
        return parts

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
            parts += self._take(size)
            total += size
            ends[k + 1] = total
            if total >= ARRAY_BYTES:
                rows = k + 1
                ends = ends[:rows + 1]
                break
        self.left -= rows
        if total < 1 << 31 and not self.large:
            kind, offsets = pa.binary(), ends.astype(np.int32)
        else:
            kind, offsets = pa.large_binary(), ends
        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(b"".join(parts))])


# Thrift compact protocol: just enough to read a PageHeader (a struct of ints, structs,
# binaries and lists), every field kept by its id.

def _varint(b, i: int):
    r = s = 0
    while True:
        x = b[i]
        i += 1
        r |= (x & 0x7F) << s
        s += 7
        if x < 0x80:
            return r, i


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
            v, i = _varint(b, i)
            fid = (v >> 1) ^ -(v & 1)
        out[fid], i = _thrift_value(b, i, kind)


def _thrift_value(b, i: int, kind: int):
    if kind in (1, 2):                  # bool in the field header
        return kind == 1, i
    if kind == 3:
        return b[i], i + 1
    if kind in (4, 5, 6):               # zigzag varints
        v, i = _varint(b, i)
        return (v >> 1) ^ -(v & 1), i
    if kind == 7:
        if i + 8 > len(b):
            raise IndexError
        return struct.unpack_from("<d", b, i)[0], i + 8
    if kind == 8:
        n, i = _varint(b, i)
        if i + n > len(b):
            raise IndexError
        return bytes(b[i:i + n]), i + n
    if kind in (9, 10):                 # list, set
        h = b[i]
        i += 1
        n, elem = h >> 4, h & 15
        if n == 15:
            n, i = _varint(b, i)
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
