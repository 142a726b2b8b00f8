"""Reading one Parquet column of plain strings page by page, without pyarrow: the
footer (Thrift, read here), the pages decompressed as they are taken, the documents
handed on as blocks of bytes plus end offsets. So the first documents of a row group
come out before its pages are decompressed whole (docs/OPTIMIZATION_LOG.md, E62:
english.parquet's first row group opens with a page of 1,024 documents, 45 MB
decompressed), no Arrow array is built, and pyarrow is not even imported (T52: 0.07 s
and 35 MB at start-up, its reading buffers at peak).

Only the simplest layout is read here, the one pyarrow writes for a text column
without a dictionary: a top-level BYTE_ARRAY column (UTF8 / STRING or no annotation),
PLAIN encoding, data pages v1 or v2, no repetition levels, no nulls, ZSTD / GZIP / no
compression, no encryption. Anything else, in the footer or in a row group's pages,
raises `Unsupported`, and the caller hands that file, or the rest of that row group
(skipping the rows already given), to pyarrow: the rows that come out are always
pyarrow's rows. The footer and page headers are read as strictly as Thrift reads them,
and a page must end where its header says, so that a damaged file is refused here
where pyarrow refuses it (tests/test_parquet_pages.py damages files at random and
compares). The one difference: the key-value metadata (where pyarrow keeps its Arrow
schema, base64) is not read here, so a file whose data is intact but whose Arrow
schema is damaged is read here, where pyarrow refuses it.

- `text_chunks(path, column)`: the column's chunk in every row group (`Chunk`), from
  the footer; raises Unsupported.
- `chunk_blocks(fd, chunk)`: a chunk's documents as (uint8 data, uint64 end offsets)
  blocks of about ARRAY_BYTES;
- `chunk_into(fd, chunk, sink)`: the same copied straight into the padded buffer the
  library counts from (buffers.PackedBuilder; training: no other copy of the text).
- `row_group_arrays(p, pf, g, column, batch_rows)`: the same as Arrow arrays (for the
  readers that hold a pyarrow ParquetFile), pyarrow itself for the rest.
- `column_sizes(path)`: uncompressed bytes per row group and top-level column (the
  reading estimates), or None.
"""
from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass

__all__ = ["Unsupported", "Chunk", "text_chunks", "chunk_blocks", "chunk_into",
           "row_group_arrays",
           "pyarrow_rows", "column_sizes"]

READ_BYTES = 1 << 20                # decompressed bytes taken from a page at a time
ARRAY_BYTES = 4 << 20               # an array or block ends with the value that reaches
                                    # this (a block of the encoder is 8 MB: the first
                                    # comes out after 8 MB, not after 256 long documents)
_CODECS = {0: None, 2: "gzip", 6: "zstd"}   # CompressionCodec ids read here
_DATA_PAGE, _DATA_PAGE_V2 = 0, 3    # PageType
_PLAIN, _RLE = 0, 3                 # Encoding
_BYTE_ARRAY = 6                     # Type
_REQUIRED, _OPTIONAL = 0, 1         # FieldRepetitionType
_UTF8 = 0                           # ConvertedType
_MAGIC = b"PAR1"


class Unsupported(Exception):
    """A layout this reader leaves to pyarrow."""



@dataclass(frozen=True)
class Chunk:
    """One row group's chunk of the column: its rows, codec (None, "gzip", "zstd"), the
    file offset and compressed size of its pages, and whether its values carry
    definition levels (an OPTIONAL column)."""
    rows: int
    codec: str | None
    start: int
    size: int
    optional: bool


# ------------------------------------------------------------------------ the footer

def _footer(path) -> dict:
    """The FileMetaData of a Parquet file, as _thrift_struct reads it."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 12 or f.read(4) != _MAGIC:
            raise Unsupported("not a Parquet file")
        f.seek(size - 8)
        n, magic = struct.unpack("<I4s", f.read(8))
        if magic != _MAGIC or not 0 < n <= size - 12:
            raise Unsupported("no plain footer")        # (PARE: encrypted)
        f.seek(size - 8 - n)
        raw = f.read(n)
    try:
        meta, end = _thrift_struct(memoryview(raw), 0)
    except IndexError:
        raise Unsupported("the footer ends early") from None
    if end != n:
        raise Unsupported("bytes after the footer")
    if 8 in meta:
        raise Unsupported("encrypted")
    return meta


def _row_groups(meta: dict) -> list[tuple[int, list[dict]]]:
    """(rows, ColumnMetaData of every leaf column) per row group."""
    out = []
    for rg in _required(meta, _LIST, 4)[0]:
        columns, rows = _required(rg, _LIST, 1)[0], _required(rg, _I64, 3)[0]
        metas = []
        for cc in columns:
            if not isinstance(cc, dict) or 1 in cc or 8 in cc or 9 in cc:
                raise Unsupported("a column chunk in another file, or encrypted")
            metas.append(_struct(cc, 3))
        if rows < 0:
            raise Unsupported("a negative row count")
        out.append((rows, metas))
    return out


def _leaves(meta: dict) -> list[tuple[tuple, dict]]:
    """(path, SchemaElement) of every leaf column of the schema, in file order: a leaf
    at the top is (name,), one inside a group (group, ..., name)."""
    schema = _required(meta, _LIST, 2)[0]
    if not schema or not all(isinstance(e, dict) for e in schema):
        raise Unsupported("no schema")
    paths: list[tuple] = []

    def walk(i: int, prefix: tuple) -> int:
        el = schema[i]
        children = _typed(el, 5, _I32)
        name = _typed(el, 4, _BINARY)
        if name is None:
            raise Unsupported("a schema element without a name")
        path = prefix + (name,) if i else prefix
        i += 1
        if children is None:
            paths.append((path, el))
            return i
        if children < 0:
            raise Unsupported("a negative child count")
        for _ in range(children):
            if i >= len(schema):
                raise Unsupported("the schema ends early")
            i = walk(i, path)
        return i

    if walk(0, ()) != len(schema):
        raise Unsupported("schema elements left over")
    return paths


def text_chunks(path, column: str) -> list[Chunk]:
    """The chunk of `column` (a top-level column of plain strings) in every row group of
    the Parquet file at `path`. Unsupported for anything this module does not read
    (and for a file that is not Parquet, or is damaged: pyarrow then names it). The
    footer is read once per file version (path, size, mtime), not once per row group
    of the readers that ask row group by row group."""
    st = os.stat(path)
    return list(_text_chunks(os.fspath(path), column, st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=16)
def _text_chunks(path: str, column: str, size: int, mtime_ns: int) -> tuple:
    return tuple(_read_text_chunks(path, column))


def _read_text_chunks(path, column: str) -> list[Chunk]:
    meta = _footer(path)
    leaves = _leaves(meta)
    want = (column.encode("utf-8"),)
    found = [k for k, (p, _) in enumerate(leaves) if p[:1] == want]
    if len(found) != 1 or leaves[found[0]][0] != want:
        raise Unsupported("not one top-level leaf column")
    k = found[0]
    el = leaves[k][1]
    repetition = _typed(el, 3, _I32)
    converted = el.get(6)               # (type, value) when there
    logical = el.get(10)
    if (_typed(el, 1, _I32) != _BYTE_ARRAY or repetition not in (_REQUIRED, _OPTIONAL)
            or converted not in (None, (_I32, _UTF8))
            or logical is not None and (logical[0] != _STRUCT or set(logical[1]) - {1})):
        raise Unsupported("not a column of strings")
    chunks = []
    for rows, metas in _row_groups(meta):
        if len(metas) != len(leaves):
            raise Unsupported("a row group without every column")
        cm = metas[k]
        kind, encodings, names, codec, values, _, size, start = _required(
            cm, None, 1, 2, 3, 4, 5, 6, 7, 9)
        if (kind != _BYTE_ARRAY or tuple(names) != want or codec not in _CODECS
                or values != rows or size < 0 or start < 4 or 11 in cm
                or not set(encodings) <= {_PLAIN, _RLE, 4}):   # 4: BIT_PACKED levels
            raise Unsupported("a chunk of another layout")
        chunks.append(Chunk(rows, _CODECS[codec], start, size, repetition == _OPTIONAL))
    return chunks


def column_sizes(path) -> list[dict[str, int]] | None:
    """Per row group, the uncompressed bytes of each top-level column (a group's leaves
    added up), from the footer; None when this module cannot read the footer."""
    try:
        meta = _footer(path)
        leaves = _leaves(meta)
        out = []
        for _, metas in _row_groups(meta):
            sizes: dict[str, int] = {}
            for (p, _), cm in zip(leaves, metas):
                name = p[0].decode("utf-8", "replace") if p else ""
                sizes[name] = sizes.get(name, 0) + _required(cm, _I64, 6)[0]
            out.append(sizes)
        return out
    except (Unsupported, OSError, ValueError, TypeError):
        return None


# ------------------------------------------------------------------------- the pages

def chunk_blocks(fd: int, chunk: Chunk, block_bytes: int | None = None):
    """The documents of one chunk, read from file descriptor fd, as (data, ends) blocks:
    data a uint8 array of the documents' bytes, ends their end offsets in it (uint64);
    a block ends with the document that reaches block_bytes (default ARRAY_BYTES).
    Unsupported (after the blocks before it) for what pyarrow must read."""
    import numpy as np

    limit = ARRAY_BYTES if block_bytes is None else block_bytes
    for values in _pages(fd, chunk):
        while values.left:
            parts, ends, _ = values.take_values(values.left, limit)
            data = b"".join(parts)
            yield np.frombuffer(data, dtype=np.uint8), ends[1:].astype(np.uint64)


def chunk_into(fd: int, chunk: Chunk, sink):
    """The documents of one chunk copied into `sink` (a buffers.PackedBuilder) straight
    from the decompressed pages; yields each time the sink is full, for the caller to
    take its batch. Unsupported for what pyarrow must read (the documents before it
    are in the sink: sink.added counts them)."""
    for values in _pages(fd, chunk):
        while values.left:
            values.copy_into(sink)
            if sink.full:
                yield


class _ChunkFile:
    """A chunk's bytes read from the file a page at a time (os.pread), so that reading
    holds one compressed page, not the whole chunk: `at(pos, n)` gives at least the n
    bytes from chunk offset pos (up to PEEK_BYTES more, or the chunk's end), as a
    memoryview whose first byte is at pos."""

    PEEK_BYTES = 64 << 10

    def __init__(self, fd: int, chunk: Chunk):
        self.fd, self.start, self.size = fd, chunk.start, chunk.size
        self.lo, self.buf = 0, memoryview(b"")

    def __len__(self) -> int:
        return self.size

    def at(self, pos: int, n: int) -> memoryview:
        if not (self.lo <= pos and pos + n <= self.lo + len(self.buf)):
            want = min(self.size - pos, max(n, self.PEEK_BYTES))
            data = os.pread(self.fd, want, self.start + pos)
            if len(data) != want:
                raise Unsupported("the chunk runs past the end of the file")
            self.lo, self.buf = pos, memoryview(data)
        return self.buf[pos - self.lo:]


def _pages(fd: int, chunk: Chunk):
    """Every data page of one chunk (read from fd a page at a time) as a _Values, in
    order; the consumer takes all of a page's values before asking for the next (its
    end is then checked)."""
    data = _ChunkFile(fd, chunk)
    dec = _Decompressor()
    pos = got = 0
    while got < chunk.rows:
        if pos >= len(data):
            raise IndexError("the chunk ends before its rows")
        try:
            header, hlen = _thrift_struct(data.at(pos, 1), 0)
        except IndexError:              # a header longer than the peek: all the rest
            header, hlen = _thrift_struct(data.at(pos, len(data) - pos), 0)
        pos += hlen                     # (IndexError past the chunk's end)
        kind, page_bytes, size = _required(header, _I32, 1, 2, 3)
        if not 0 <= size <= len(data) - pos or page_bytes < 0:
            raise Unsupported("a page size out of its chunk")
        values = _page_values(header, kind, page_bytes, data.at(pos, size)[:size],
                              chunk.codec, chunk.optional, dec)
        pos += size
        if not 0 <= values.count <= chunk.rows - got:
            raise Unsupported("a value count out of range")
        yield values
        values.finish()
        got += values.count


class _Plain:
    """An uncompressed page as a stream: read(n) gives views, no copy."""

    def __init__(self, page: memoryview):
        self.page, self.at = page, 0

    def read(self, n: int) -> memoryview:
        out = self.page[self.at:self.at + n]
        self.at += len(out)
        return out


class _Decompressor:
    """One chunk's zstd decompressor, made at its first page and used for each page in
    turn (a chunk's pages are read one after another: one stream at a time): a fresh
    one per page allocated its context and window again each time (3-6 MB more at the
    `train` command's peak, log T61)."""

    def __init__(self):
        self.zstd = None

    def stream(self, page: memoryview):
        if self.zstd is None:
            import zstandard

            self.zstd = zstandard.ZstdDecompressor()
        return self.zstd.stream_reader(page, read_across_frames=True)


def _stream(page: memoryview, codec, dec: _Decompressor):
    if codec is None:
        return _Plain(page)
    if codec == "zstd":
        return dec.stream(page)
    import pyarrow as pa
    return pa.CompressedInputStream(pa.py_buffer(page), codec)


def row_group_arrays(p, pf, g: int, column: str, batch_rows: int):
    """The column of row group g of pyarrow ParquetFile pf (at path p) as Arrow arrays of
    up to batch_rows rows, decoded as they are taken. Plain strings are streamed here
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
    except Exception:                   # Unsupported, or damage pyarrow will name
        pass
    yield from pyarrow_rows(pf, g, column, batch_rows, done)


def pyarrow_rows(pf, g: int, column: str, batch_rows: int, skip: int = 0):
    """Row group g's column read by pyarrow, as arrays of up to batch_rows rows, the
    first `skip` rows left out."""
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=[g], columns=[column],
                                 use_threads=False):
        array = batch.column(0)
        if skip >= len(array):
            skip -= len(array)
            continue
        if skip:
            array, skip = array.slice(skip), 0
        yield array


def _plain_strings(p, pf, g: int, column: str, batch_rows: int):
    import pyarrow as pa

    arrow_type = pf.schema_arrow.field(column).type
    large = pa.types.is_large_string(arrow_type) or pa.types.is_large_binary(arrow_type)
    if not (large or pa.types.is_string(arrow_type) or pa.types.is_binary(arrow_type)):
        raise Unsupported("not strings")
    chunk = text_chunks(p, column)[g]
    fd = os.open(p, os.O_RDONLY)
    try:
        for values in _pages(fd, chunk):
            while values.left:
                yield values.array(batch_rows, large)
    finally:
        os.close(fd)


def _page_values(header: dict, kind: int, page_bytes: int, page: memoryview, codec,
                 optional: bool, dec: _Decompressor) -> "_Values":
    if kind == _DATA_PAGE:
        n, encoding, def_encoding, _ = _required(_struct(header, 5), _I32, 1, 2, 3, 4)
        if encoding != _PLAIN:
            raise Unsupported("not PLAIN")
        values = _Values(_stream(page, codec, dec), n, page_bytes)
        if optional:                    # 4-byte length, then the levels: all 1s?
            if def_encoding != _RLE:
                raise Unsupported("levels not RLE")
            ones = _rle_ones(n)
            (size,) = struct.unpack("<I", values.take_bytes(4))
            if size != len(ones) or values.take_bytes(size) != ones:
                raise Unsupported("nulls")
        return values
    if kind == _DATA_PAGE_V2:
        dph = _struct(header, 8)
        n, nulls, rows, encoding, def_bytes, rep_bytes = _required(dph, _I32, 1, 2, 3, 4,
                                                                   5, 6)
        if encoding != _PLAIN or nulls != 0 or rep_bytes != 0 or rows != n:
            raise Unsupported("not PLAIN without nulls")
        levels = _rle_ones(n) if optional else b""      # (no length before them)
        if def_bytes != len(levels) or bytes(page[:def_bytes]) != levels:
            raise Unsupported("nulls")         # (levels are never compressed)
        rest = page[def_bytes:]
        compressed = _typed(dph, 7, _BOOL)
        return _Values(_stream(rest, codec if compressed is not False else None, dec), n,
                       page_bytes - def_bytes)
    raise Unsupported(f"page type {kind}")


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

    def __init__(self, stream, count: int, page_bytes: int):
        self.stream = stream
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
                    raise Unsupported("page ends early")
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
            raise Unsupported("the page does not end after its values")

    def take_bytes(self, n: int) -> bytes:
        return b"".join(self._take(n))

    def _value_size(self) -> int:
        """The next value's 4-byte length (read from the current piece when it holds
        it); Unsupported for one longer than what is left of the page."""
        piece, at = self.piece, self.at
        if len(piece) - at >= 4:
            (size,) = struct.unpack("<I", piece[at:at + 4])
            self.at = at + 4
            self.taken += 4
        else:
            (size,) = struct.unpack("<I", self.take_bytes(4))
        if size > self.page_bytes - self.taken:
            raise Unsupported("a value longer than its page")
        return size

    def take_values(self, rows: int, limit: int):
        """The next values, up to `rows` of them or the first to reach `limit` bytes:
        (their bytes as views, their offsets from 0 as int64 (one more than values),
        how many)."""
        import numpy as np

        rows = min(rows, self.left)
        parts, ends, total = [], np.empty(rows + 1, dtype=np.int64), 0
        ends[0] = 0
        take = self._take
        for k in range(rows):
            size = self._value_size()
            parts += take(size)
            total += size
            ends[k + 1] = total
            if total >= limit:
                rows = k + 1
                ends = ends[:rows + 1]
                break
        self.left -= rows
        return parts, ends, rows

    def copy_into(self, sink) -> int:
        """Copy the next values into `sink` (a buffers.PackedBuilder), each straight
        from the decompressed pieces, until the page's values end or the sink is
        full; how many. A value that fails half-way is not taken by the sink."""
        take = self._take
        k = 0
        while self.left:
            size = self._value_size()
            dst, o = sink.room(size), 0
            for part in take(size):
                n = len(part)
                dst[o:o + n] = part
                o += n
            sink.end_doc(size)
            self.left -= 1
            k += 1
            if sink.full:
                break
        return k

    def array(self, rows: int, large: bool):
        """The next values, up to `rows` of them or the first to reach ARRAY_BYTES, as
        one binary Arrow array (large_binary when `large`; one copy of their bytes)."""
        import numpy as np
        import pyarrow as pa

        parts, ends, rows = self.take_values(rows, ARRAY_BYTES)
        total = int(ends[-1])
        if large:
            kind, offsets = pa.large_binary(), ends
        elif total < 1 << 31:
            kind, offsets = pa.binary(), ends.astype(np.int32)
        else:                           # one value of 2 GB or more: not a binary array
            raise Unsupported("a value too long for 32-bit offsets")
        return pa.Array.from_buffers(kind, rows, [None, pa.py_buffer(offsets),
                                                  pa.py_buffer(b"".join(parts))])


# Thrift compact protocol: just enough to read a FileMetaData and a PageHeader (structs
# of ints, structs, binaries and lists), every field kept by its id with its type, as strict as
# Thrift's own reader (varints of at most 5 / 10 bytes, no negative sizes, required
# fields of their types): a header pyarrow refuses is refused here too, and pyarrow
# then names it.

_BOOL, _I32, _I64, _BINARY, _LIST, _STRUCT = 1, 5, 6, 8, 9, 12  # compact types (a bool
                                                               # is 1 or 2)


def _typed(d: dict, fid: int, kind: int):
    """Field fid's value if it is there with the type Thrift's generated reader
    expects (it skips a field of another type), else None."""
    k, v = d.get(fid, (None, None))
    return v if k == kind or (kind == _BOOL and k == 2) else None


def _required(d: dict, kind: int | None, *fids: int) -> list:
    """The values of required fields of one type (kind None: of ColumnMetaData's types,
    _CMD_TYPES); a struct without one of them is refused (as Thrift's generated reader
    refuses it)."""
    values = [_typed(d, f, _CMD_TYPES[f] if kind is None else kind) for f in fids]
    if None in values:
        raise Unsupported("a required field missing")
    return values


# ColumnMetaData: type, encodings, path_in_schema, codec, num_values,
# total_uncompressed_size, total_compressed_size, data_page_offset
_CMD_TYPES = {1: _I32, 2: _LIST, 3: _LIST, 4: _I32, 5: _I64, 6: _I64, 7: _I64, 9: _I64}


def _struct(d: dict, fid: int) -> dict:
    v = _typed(d, fid, _STRUCT)
    if v is None:
        raise Unsupported(f"no struct field {fid}")
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
                raise Unsupported("a varint out of range")
            return r, i
        if s >= bits + 7:
            raise Unsupported("a varint too long")


def _zigzag(v: int) -> int:
    return (v >> 1) ^ -(v & 1)


def _size(b, i: int):
    n, i = _varint(b, i)
    if n >> 31:
        raise Unsupported("a negative size")
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
            raise Unsupported(f"thrift type {elem}")
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
    raise Unsupported(f"thrift type {kind}")
