"""The Python encoding surface of Tokenizer (SPEC §5, §6, §9): encode, encode_batch,
encode_many, encode_document, render_chat, decode_bytes, decode.

Encoding is checked against the naive twin (harness.dev.twin.encode); decoding against the
bytes of the input. The tokenizer is trained by the assembly on the bundled sample, with
the seed pre-tokenizer (the twin's default).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import harness
from harness.dev import twin
from harness._lib import ffi
from harness.tokenizer import MASKBIT, SPECIALS, Tokenizer

KJV = Path(__file__).resolve().parent.parent / "datasets" / "kjv.txt"

MIXED = ["Hello world", "don't STOP 123456 $9.99", "naïve café — “quotes”",
         "日本語のテキスト。", "日 旦 旧 早 旬 旭", "emoji 😀😀 ok", "x  \n\n  y\r\n",
         "<|bos|> <|end|>", ""]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    """2048 ids, trained on the bundled KJV sample plus a little non-ASCII text."""
    docs = [KJV.read_bytes()] + [t.encode() for t in MIXED] * 50
    return harness.train(docs, vocab_size=2048, pretokenizer="seed").tokenizer


@pytest.fixture(scope="module")
def kjv_docs() -> list[bytes]:
    text = KJV.read_bytes()[:60_000]
    return [text[i:i + 6000] for i in range(0, len(text), 6000)]


def ids(a) -> list[int]:
    return np.asarray(a).tolist()


# ------------------------------------------------------------------------------ encode

def test_encode_matches_the_twin(tok, kjv_docs):
    for doc in kjv_docs[:3] + [t.encode() for t in MIXED]:
        got = tok.encode(doc)
        assert got.dtype == np.uint16
        assert ids(got) == twin.encode(tok.merges, doc, pretokenizer=tok.pretokenizer)


def test_str_and_bytes_encode_alike(tok):
    for text in MIXED:
        assert ids(tok.encode(text)) == ids(tok.encode(text.encode()))
    lone = "a\ud800b"                                    # surrogatepass
    assert ids(tok.encode(lone)) == ids(tok.encode(lone.encode("utf-8", "surrogatepass")))


def test_encode_batch_and_encode_many_agree_with_encode(tok, kjv_docs):
    docs = kjv_docs[:4] + MIXED
    singles = [ids(tok.encode(d)) for d in docs]
    assert [ids(a) for a in tok.encode_batch(docs)] == singles
    assert [ids(a) for a in tok.encode_batch(docs, threads=2)] == singles
    flat, counts = tok.encode_many(docs)
    assert flat.dtype == np.uint16 and counts.dtype == np.uint64
    assert counts.tolist() == [len(s) for s in singles]
    assert ids(flat) == [i for s in singles for i in s]
    assert ids(tok.encode_many(docs, cache=False)[0]) == ids(flat)


def test_empty_inputs(tok):
    assert tok.encode("").dtype == np.uint16 and tok.encode("").size == 0
    assert tok.encode_batch([]) == []
    flat, counts = tok.encode_many([])
    assert flat.size == 0 and counts.size == 0
    assert [a.size for a in tok.encode_batch(["", "a", ""])] == [0, 1, 0]


def test_bad_documents_raise(tok):
    with pytest.raises(TypeError, match="document 1"):
        tok.encode_many(["ok", 3])
    with pytest.raises(ValueError, match="threads"):
        tok.encode_many(["ok"], threads=0)


def test_bos(tok):
    bos = tok.special_id("<|bos|>")
    assert bos == tok.vocab_size - 16
    plain = ids(tok.encode("In the beginning"))
    assert ids(tok.encode("In the beginning", bos=True)) == [bos] + plain
    assert ids(tok.encode_document("In the beginning")) == [bos] + plain
    assert ids(tok.encode_document("")) == [bos]
    flat, counts = tok.encode_many(["a", "", "b"], bos=True)
    assert counts.tolist() == [2, 1, 2]
    assert ids(flat) == [bos, ord("a"), bos, bos, ord("b")]
    assert [ids(a) for a in tok.encode_batch(["a", ""], bos=True)] == [[bos, ord("a")], [bos]]


def test_special_text_is_ordinary_text(tok):
    text = "<|bos|><|user|> hi <|end|><|reserved_10|>"
    got = ids(tok.encode(text))
    assert not set(got) & set(tok.specials.values())
    assert got == twin.encode(tok.merges, text.encode(), pretokenizer=tok.pretokenizer)
    assert tok.decode(got) == text


# ------------------------------------------------------------------------- render_chat

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Who created the heaven?"},
    {"role": "assistant", "content": "God created the heaven and the earth."},
    {"role": "user", "content": ""},
    {"role": "assistant", "content": "日本語 😀"},
]


def test_render_chat_layout_and_maskbit(tok):
    sp = tok.specials
    out = tok.render_chat(CHAT)
    assert out.dtype == np.uint16
    expected, masked = [sp["<|bos|>"]], [False]
    for m in CHAT:
        content = ids(tok.encode(m["content"]))
        learn = m["role"] == "assistant"
        expected += [sp[f"<|{m['role']}|>"]] + content + [sp["<|end|>"]]
        masked += [False] + [learn] * len(content) + [learn]
    got = ids(out)
    assert [i & ~MASKBIT for i in got] == expected
    assert [bool(i & MASKBIT) for i in got] == masked
    assert tok.decode(out) == ("<|bos|><|system|>Be brief.<|end|><|user|>Who created the "
                               "heaven?<|end|><|assistant|>God created the heaven and the "
                               "earth.<|end|><|user|><|end|><|assistant|>日本語 😀<|end|>")


def test_render_chat_empty_conversation(tok):
    assert ids(tok.render_chat([])) == [tok.special_id("<|bos|>")]


@pytest.mark.parametrize("bad, problem", [
    ({"role": "robot", "content": "hi"}, "unknown role 'robot'"),
    ({"content": "hi"}, "unknown role None"),
    ({"role": "user"}, "content must be a str, got missing"),
    ({"role": "user", "content": b"hi"}, "content must be a str, got bytes"),
    ({"role": "user", "content": None}, "content must be a str, got NoneType"),
    ("user: hi", "expected a dict"),
])
def test_render_chat_rejects_bad_messages_naming_them(tok, bad, problem):
    with pytest.raises(ValueError, match="message 1: " + problem):
        tok.render_chat([CHAT[0], bad])


def chain_tokenizer(n_merges: int) -> Tokenizer:
    """A valid tokenizer of any size: merge i joins the previous token and 'a'."""
    merges = [(ord("a"), ord("a"))] + [(256 + i - 1, ord("a")) for i in range(1, n_merges)]
    return Tokenizer(np.array(merges, dtype=np.uint16))


def test_render_chat_refuses_vocab_above_32768():
    assert chain_tokenizer(32768 - 272).render_chat([CHAT[2]]).size > 0
    big = chain_tokenizer(32768 - 272 + 100)             # vocab_size 32868
    with pytest.raises(ValueError, match="32768"):
        big.render_chat([CHAT[2]])
    # and there an id with the top bit is a real token, not a masked one
    top = big.special_id("<|bos|>")
    assert top & MASKBIT
    assert big.decode_bytes([top]) == b"<|bos|>"
    assert big.decode_bytes([0x8000]) == b"a" * (0x8000 - 256 + 2)


# ------------------------------------------------------------------------------ decode

@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_decode_bytes_inverts_encode_on_any_bytes(tok, data):
    assert tok.decode_bytes(tok.encode(data)) == data


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_decode_inverts_encode_on_text(tok, text):
    assert tok.decode(tok.encode(text), errors="strict") == text


def test_partial_utf8_tokens(tok):
    # 旺 (E6 97 BA) was not in training, but E6 97 starts the six characters that were
    text = "旺 日本語 旺盛"
    tokens = ids(tok.encode(text))
    pieces = [tok.decode_bytes([t]) for t in tokens]
    assert b"".join(pieces) == text.encode()
    partial = [t for t, p in zip(tokens, pieces) if len(p) >= 2 and not _is_utf8(p)]
    assert partial, "expected a merged token that cuts a character (E6 97)"
    with pytest.raises(UnicodeDecodeError):
        tok.decode([partial[0]], errors="strict")
    assert "\ufffd" in tok.decode([partial[0]])          # errors="replace" by default
    assert tok.decode(tokens, errors="strict") == text


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_decode_strict_raises_on_a_stray_byte(tok):
    with pytest.raises(UnicodeDecodeError):
        tok.decode([ord("a"), 0xE2, ord("b")], errors="strict")
    assert tok.decode([ord("a"), 0xE2, ord("b")]) == "a\ufffdb"


def test_specials_decode_to_their_names(tok):
    assert tok.decode_bytes(list(tok.specials.values())) == "".join(SPECIALS).encode()


def test_maskbit_is_stripped(tok):
    tokens = tok.encode("And God said, Let there be light")
    assert tok.decode_bytes(tokens | np.uint16(MASKBIT)) == tok.decode_bytes(tokens)
    assert tok.decode([tok.special_id("<|end|>") | MASKBIT]) == "<|end|>"


@pytest.mark.parametrize("bad_id", ["vocab", "vocab+mask", -1, 0x10000, 2 ** 64 - 1])
def test_unknown_ids_raise_naming_the_position(tok, bad_id):
    bad = {"vocab": tok.vocab_size, "vocab+mask": tok.vocab_size | MASKBIT}.get(bad_id, bad_id)
    arr = np.array([ord("a"), ord("b"), 0, bad, ord("c")],
                   dtype=np.uint64 if bad == 2 ** 64 - 1 else np.int64)
    with pytest.raises(ValueError, match=rf"id {bad} at position 3 "):
        tok.decode_bytes(arr)
    with pytest.raises(ValueError, match="position 3"):
        tok.decode(arr)


def test_decode_argument_checks(tok):
    assert tok.decode_bytes([]) == b"" and tok.decode(np.array([], dtype=np.uint16)) == ""
    with pytest.raises(TypeError):
        tok.decode_bytes([1.5, 2.0])
    with pytest.raises(ValueError, match="flat"):
        tok.decode_bytes([[1, 2], [3, 4]])


def test_decode_bytes_is_fast_on_millions_of_ids(tok, kjv_docs):
    tokens = tok.encode(b"".join(kjv_docs))
    reps = -(-3_000_000 // tokens.size)
    many = np.tile(tokens, reps)
    expected = b"".join(kjv_docs) * reps
    tok.decode_bytes(many[:10])                         # builds the table once
    start = time.perf_counter()
    out = tok.decode_bytes(many)
    seconds = time.perf_counter() - start
    assert out == expected
    assert seconds < 2.0, f"decode_bytes of {many.size:,} ids took {seconds:.2f} s"


def test_document_pointers_of_bytes_are_their_data(tok, kjv_docs):
    """A list of plain bytes gets its pointer table from the objects' ids (the CPython
    header offset, checked once: log E70); it must be exactly where cffi finds each
    object's data, for every length (the empty and one-byte objects are shared ones),
    and lists with anything else take cffi's way for every document."""
    from harness import buffers

    docs = [b"", b"a", b"ab", bytes(range(256)), b"x" * 10_000] + kjv_docs[:50]
    assert buffers._bytes_data_offset() > 0                     # (CPython)
    table, ends, n, keep = buffers.doc_pointers(docs)
    got = [int(ffi.cast("uintptr_t", table[i])) for i in range(len(docs))]
    want = [int(ffi.cast("uintptr_t", ffi.from_buffer("uint8_t[]", d))) for d in docs]
    assert got == want
    assert ends.tolist() == np.cumsum([len(d) for d in docs]).tolist() and n == ends[-1]

    class Sub(bytes):
        pass

    mixed = docs[:3] + [Sub(b"sub"), bytearray(b"arr")]
    table, ends, n, keep = buffers.doc_pointers(mixed)
    assert [ffi.buffer(table[i], len(d))[:] for i, d in enumerate(mixed)] == [bytes(d) for d in mixed]
    tokens, counts = tok.encode_many(mixed, threads=1)
    assert np.array_equal(tokens, np.concatenate([tok.encode(bytes(d)) for d in mixed]))


def test_encode_many_takes_any_bytes_like_document_where_it_lies(tok, kjv_docs):
    """The library takes each document by pointer (asmbpe_encode_docs): bytes,
    bytearray, memoryview, numpy arrays of any item size (harness.encoder, their bytes),
    and Arrow-layout TextBatch blocks of several parts all give the twin's ids."""
    from harness.buffers import TextBatch
    from harness.encoder import encode_many

    raw = [d for d in kjv_docs[:4]] + [t.encode() for t in MIXED]
    want = [twin.encode(tok.merges, d, pretokenizer=tok.pretokenizer) for d in raw]
    tokens, counts = tok.encode_many([raw[0], bytearray(raw[1]), memoryview(raw[2])] + raw[3:],
                                     threads=2)
    ends = np.cumsum(counts)
    assert [ids(tokens[e - c:e]) for e, c in zip(ends, counts)] == want

    words = np.frombuffer(raw[0][:4000], dtype=np.uint32)      # 1000 items, 4000 bytes
    forms = raw[:3] + [np.frombuffer(raw[3], np.uint8), words] + raw[4:]
    expect = want[:4] + [twin.encode(tok.merges, raw[0][:4000], pretokenizer=tok.pretokenizer)] + want[4:]
    tokens, counts = encode_many(tok, forms, threads=2)
    ends = np.cumsum(counts)
    assert [ids(tokens[e - c:e]) for e, c in zip(ends, counts)] == expect

    def batch(docs):
        data = np.frombuffer(b"".join(docs), dtype=np.uint8)
        return TextBatch(data, np.cumsum([len(d) for d in docs], dtype=np.uint64))

    joined = TextBatch.concat([batch(raw[:3]), batch(raw[3:]), batch([b"", b"x"])])
    tokens, counts = tok.encode_many(joined, threads=3)
    ends = np.cumsum(counts)
    assert [ids(tokens[e - c:e]) for e, c in zip(ends, counts)] == want + [[], [ord("x")]]


def test_large_batches_are_encoded_in_groups(tok, kjv_docs, monkeypatch):
    """encode_many calls the library once per GROUP_BYTES of documents (so the output
    room stays bounded); a document longer than a group goes alone. Same ids and counts
    as one call."""
    from harness import encoder

    docs = kjv_docs + [b"", KJV.read_bytes()[:20_000], b"x"]
    want, want_counts = tok.encode_many(docs, threads=2, bos=True)
    monkeypatch.setattr(encoder, "GROUP_BYTES", 7000)
    got, counts = tok.encode_many(docs, threads=2, bos=True)
    assert np.array_equal(got, want) and np.array_equal(counts, want_counts)
    groups = list(encoder._groups(np.cumsum([len(d) for d in docs], dtype=np.uint64)))
    assert len(groups) > 5
    assert [b - a for a, b in groups].count(1) >= 2           # the 20,000-byte one alone
    assert groups[0][0] == 0 and groups[-1][1] == len(docs)
    assert all(x[1] == y[0] for x, y in zip(groups, groups[1:]))


def test_rooms_are_shared_by_encoders_and_never_by_two_calls(tok, kjv_docs):
    """Calls on two or more threads take their output room from the process's pool: a
    new encoder (a new Tokenizer) reuses the room an earlier call gave back (no fresh
    pages, log E64); calls running at once, from two Python threads on two encoders,
    each have a room of their own and get the ids of a one-thread call."""
    import threading

    from harness import encoder

    want, want_counts = tok.encode_many(kjv_docs, threads=1)
    other = Tokenizer.from_bytes(tok.to_bytes())
    tok.encode_many(kjv_docs, threads=2)
    before = [id(r) for r in encoder._ROOMS.free]
    assert before                                           # the call gave its room back
    got, counts = other.encode_many(kjv_docs, threads=2)    # a new encoder
    assert np.array_equal(got, want) and np.array_equal(counts, want_counts)
    assert [id(r) for r in encoder._ROOMS.free] == before   # the same room, given back

    results, seen = {}, set()
    taken = encoder._ROOMS.take

    def take(n):
        room = taken(n)
        assert id(room) not in seen                          # never two calls at once
        seen.add(id(room))
        return room

    def give_back(room, _give=encoder._ROOMS.give_back):
        seen.discard(id(room))
        _give(room)

    encoder._ROOMS.take, encoder._ROOMS.give_back = take, give_back
    try:
        errors = []

        def run(k, t):
            try:
                for _ in range(20):
                    results.setdefault(k, []).append(t.encode_many(kjv_docs, threads=2))
            except BaseException as e:              # (re-raised below)
                errors.append(e)

        workers = [threading.Thread(target=run, args=(k, t))
                   for k, t in enumerate((tok, other, Tokenizer.from_bytes(tok.to_bytes())))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        del encoder._ROOMS.take, encoder._ROOMS.give_back
    assert not errors, errors
    assert sorted(results) == [0, 1, 2]
    for runs in results.values():
        for got, counts in runs:
            assert np.array_equal(got, want) and np.array_equal(counts, want_counts)
    assert len(encoder._ROOMS.free) <= encoder.Pool.KEEP


def test_results_reuse_memory_only_when_every_view_is_gone(tok, kjv_docs):
    """encode_many's results are lent out of the process's pool of result blocks
    (`encoder._RESULTS`, log E66): a block comes back once the result and every view
    of it are gone, and the next call writes its ids there; while any view lives,
    the next calls get other memory and the old ids stay as they were."""
    import gc

    from harness import encoder

    def address(a):
        return a.__array_interface__["data"][0]

    want, _ = tok.encode_many(kjv_docs, threads=1)
    want = want.copy()
    for threads in (1, 2):
        got, _ = tok.encode_many(kjv_docs, threads=threads)
        first = address(got)
        view = got[5:50]                                    # keeps the block lent
        kept = view.copy()
        del got
        gc.collect()
        again, _ = tok.encode_many(kjv_docs[::-1], threads=threads)
        second = address(again)
        assert second != first
        assert np.array_equal(view, kept)                   # not overwritten
        del view, again
        gc.collect()
        assert len(encoder._RESULTS.free) == encoder.Pool.KEEP
        third, _ = tok.encode_many(kjv_docs, threads=threads)
        assert address(third) in (first, second)            # a block given back
        assert np.array_equal(third, want) and third.flags.writeable
        at = address(third)
        del third
        assert [address(b) for b in encoder._RESULTS.free] == [at]


@pytest.mark.parametrize("merges", [
    [(98, 99), (97, 98), (257, 99)],                # "abc" (258) encodes as a|bc
    [(97, 98), (98, 99), (256, 99), (97, 257)],     # 258 and 259 both spell "abc"
])
def test_whole_token_table_holds_only_ids_their_bytes_encode_to(merges):
    """The encoder's table of one-id chunks (built by the first cached call) must hold
    an id only when its own bytes encode to it: here "abc" is a merge whose bytes
    encode otherwise, or one of two ids with the same bytes. Cached calls (the table,
    then the cache, on repeated chunks) equal the twin and the uncached path."""
    tok = Tokenizer(np.array(merges, dtype=np.uint16), pretokenizer="seed")
    docs = [b"abc", b"abc abc abc", b"ab bc abc", b"cabc", b"abcabc"] * 3
    for d in docs:
        want = twin.encode(tok.merges, d, pretokenizer=tok.pretokenizer)
        assert ids(tok.encode(d)) == want, d
        assert ids(tok.encode(d, cache=False)) == want, d
    tokens, counts = tok.encode_many(docs, threads=2)
    assert ids(tokens) == [x for d in docs for x in twin.encode(tok.merges, d, pretokenizer=tok.pretokenizer)]


def _pair_home(p: int, slots: int) -> int:
    """The home slot of pair p = left << 16 | right in the encoder's pair -> merge
    table (asm/encode.inc: (p * RANK_MUL mod 2^32) >> (32 - log2(slots)))."""
    return ((p * 0x9E3779B1) & 0xFFFFFFFF) >> (32 - slots.bit_length() + 1)


def test_long_probe_runs_that_wrap_around_the_pair_table():
    """short16 looks up a new id's pairs four slots at a time (RANKV) and goes on slot
    by slot past them; the table's tail repeats its first slots, so that a run that
    wraps past the last slot is seen whole. Here the merges after the first 40 are
    chosen so that their pairs all hash near the end of the table: one long run that
    wraps. Found and not found pairs in it, cached and uncached, equal the twin."""
    letters = list(range(65, 91)) + list(range(97, 123))
    base = [(65 + i % 26, 97 + i // 26) for i in range(40)]       # ids 256..295
    slots = 1024                                                  # >= 2 * merges
    cands = [(t, x) for t in range(256, 296) for x in letters]
    cands += [(x, t) for t in range(256, 296) for x in letters]
    near_end = [c for c in cands if _pair_home(c[0] << 16 | c[1], slots) >= slots - 8]
    chosen, others = near_end[::2], near_end[1::2]                # merges / not
    merges = base + chosen
    assert 2 * len(merges) <= slots
    # the run as the library builds it (insertion in merge order, linear probing)
    table = [None] * slots
    where = {}
    for a, b in merges:
        h = _pair_home(a << 16 | b, slots)
        while table[h] is not None:
            h = (h + 1) % slots
        table[h] = (a, b)
        where[(a, b)] = h
    far = [c for c in chosen if (where[c] - _pair_home(c[0] << 16 | c[1], slots)) % slots >= 4]
    assert far and any(where[c] < slots - 8 for c in chosen)      # long, and wraps

    def spell(i: int) -> bytes:
        return bytes(base[i - 256]) if i >= 256 else bytes([i])

    words = [b" " + spell(a) + spell(b) for a, b in chosen + others]
    tok = Tokenizer(np.array(merges, dtype=np.uint16), pretokenizer="seed")
    doc = b"".join(words)
    want = twin.encode(tok.merges, doc, pretokenizer=tok.pretokenizer)
    assert ids(tok.encode(doc, cache=False)) == want
    assert ids(tok.encode(doc)) == want
    assert ids(tok.encode(doc)) == want                           # from the cache
    assert sum(1 for x in want if x >= 256 + len(base)) == len(chosen)
