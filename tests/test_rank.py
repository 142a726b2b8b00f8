"""The library's rank encoder (asm/encode_rank_*.asm, harness.rank; SPEC §11): ids equal
to tiktoken's for cl100k_base and o200k_base (built offline from ../shared/vocabs) on
every valid UTF-8 document of every shared corpus, on the code-point sweep and on
adversarial chunks, to harness.dev.rank_twin with guard pages and
the checked-call trampoline (checkasm), and to Hugging Face tokenizers on a
tokenizer.json trained here."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from harness.dev import checkasm
from harness.pretokenizers import EXACT_PATTERNS

VOCABS = Path(__file__).resolve().parents[1].parent / "shared" / "vocabs"


def test_renc_chunk_checkasm():
    lines: list[str] = []
    assert checkasm.run_checks(seed=2026, pattern="asmbpe_renc_chunk", out=lines.append), \
        "\n".join(lines)


def test_renc_text_checkasm():
    lines: list[str] = []
    assert checkasm.run_checks(seed=2026, pattern="asmbpe_renc_text", n_random=300,
                               out=lines.append), "\n".join(lines)


def test_renc_decode_checkasm():
    lines: list[str] = []
    assert checkasm.run_checks(seed=2026, pattern="asmbpe_renc_decode", out=lines.append), \
        "\n".join(lines)


def test_renc_encode_docs_checkasm():
    lines: list[str] = []
    assert checkasm.run_checks(seed=2026, pattern="asmbpe_renc_encode_docs", out=lines.append), \
        "\n".join(lines)


def test_renc_encode_checkasm():
    lines: list[str] = []
    assert checkasm.run_checks(seed=2026, pattern="asmbpe_renc_encode", out=lines.append), \
        "\n".join(lines)


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def loaded(request, tmp_path_factory):
    """(harness RankEncoder, tiktoken Encoding) of one published vocabulary."""
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    from harness.rank import RankEncoder
    from harness.vocab import KNOWN_ENCODINGS, from_tiktoken

    gz = VOCABS / f"{request.param}.tiktoken.gz"
    if not gz.is_file():
        pytest.skip(f"{gz} not found (shared/ next to the repository)")
    plain = tmp_path_factory.mktemp("vocab") / f"{request.param}.tiktoken"
    plain.write_bytes(gzip.decompress(gz.read_bytes()))
    known = KNOWN_ENCODINGS[request.param]
    enc = tiktoken.Encoding(request.param, pat_str=EXACT_PATTERNS[known.pretokenizer],
                            mergeable_ranks=load_tiktoken_bpe(str(plain)),
                            special_tokens=known.specials)
    return RankEncoder(from_tiktoken(gz)), enc


def _first_diff(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def test_ids_equal_tiktoken_on_every_valid_corpus_document(loaded, corpus_files, corpus_texts):
    """Every valid UTF-8 document of every shared corpus (tiktoken takes str only)."""
    ours, enc = loaded
    for path in corpus_files:
        docs = []
        for doc in corpus_texts(path):
            try:
                doc.encode("utf-8")
            except UnicodeEncodeError:
                continue                        # not valid UTF-8: tiktoken cannot take it
            docs.append(doc)
        got = ours.encode_batch(docs, threads=2)
        want = enc.encode_ordinary_batch(docs, num_threads=2)
        for doc, g, w in zip(docs, got, want):
            g = g.tolist()
            assert g == w, (path.name, _first_diff(g, w), doc[:80])


def test_ids_equal_tiktoken_on_the_code_point_sweep(loaded):
    """Every assigned code point in the contexts of the pre-tokenizer sweep (after a
    letter, a space, an apostrophe, a digit, ...; tests/test_pretok_twin.py)."""
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_pretok_twin import sweep_cps, sweep_text

    ours, enc = loaded
    cps, _ = sweep_cps()
    texts = [sweep_text(cps[i:i + 8192]) for i in range(0, len(cps), 8192)]
    got = ours.encode_batch(texts, threads=2)
    want = enc.encode_ordinary_batch(texts, num_threads=2)
    for t, g, w in zip(texts, got, want):
        g = g.tolist()
        assert g == w, (_first_diff(g, w), t[:40])


def test_threads_give_the_same_ids(loaded, corpus_files, corpus_texts):
    """encode_batch on 1, 2, 3 and 8 threads == encode_ordinary per document."""
    ours, _ = loaded
    docs = [d for path in corpus_files for d in corpus_texts(path)[:150]]
    want = [ours.encode_ordinary(d).tolist() for d in docs]
    for threads in (1, 2, 3, 8):
        got = [a.tolist() for a in ours.encode_batch(docs, threads=threads)]
        assert got == want, threads


ADVERSARIAL = {
    "1 MB of one letter": "a" * (1 << 20),
    "1 MB of digits": "7" * (1 << 20),
    "1 MB of spaces": " " * (1 << 20),
    "256 KB of one emoji": "\U0001F600" * (1 << 16),
    "long mixed words": "".join("Supercalifragilistic" + "ÉTÉ" * k + "xyz" * (k % 7)
                                for k in range(2000)),
    "129 and 128 letters": "b" * 129 + " " + "c" * 128,
    "specials as ordinary text": "a<|endoftext|>b<|fim_prefix|>",
}


def _tiktoken_ids(enc, text: str, pretokenizer: str) -> list[int]:
    """tiktoken's ids, its BPE given the chunks of harness.split (the same cut as its
    pattern, tests/test_pretok_exact.py): tiktoken's own regex overflows its stack on
    1 MB of spaces with o200k's pattern (`\\s+(?!\\S)`: a PanicException)."""
    import harness
    return [i for chunk in harness.split(text, pretokenizer=pretokenizer)
            for i in enc._encode_single_piece(chunk)]


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_ids_equal_tiktoken_on_adversarial_chunks(loaded, name):
    ours, enc = loaded
    text = ADVERSARIAL[name]
    got = ours.encode_ordinary(text).tolist()
    want = _tiktoken_ids(enc, text, ours.vocab.pretokenizer)
    assert got == want, (name, _first_diff(got, want))
    if len(text) <= 1 << 16:
        assert got == enc.encode_ordinary(text)
    assert ours.decode_bytes(got) == text.encode("utf-8")


def test_allowed_special_as_tiktoken(loaded):
    ours, enc = loaded
    text = "hi<|endoftext|> there<|endofprompt|>!"
    assert ours.encode(text, allowed_special="all").tolist() == enc.encode(text, allowed_special="all")
    assert ours.encode(text, allowed_special={"<|endoftext|>"}).tolist() == \
        enc.encode(text, allowed_special={"<|endoftext|>"}, disallowed_special=())
    assert ours.encode(text).tolist() == enc.encode_ordinary(text)
    assert ours.decode_bytes(ours.encode(text, allowed_special="all")) == text.encode("utf-8")
    with pytest.raises(ValueError, match="not a special token"):
        ours.encode(text, allowed_special={"<|nope|>"})


def test_ids_equal_hf_tokenizers(tmp_path, corpus_files, corpus_texts):
    """A tokenizer.json trained here with HF's own trainer (ByteLevel, GPT-2's regex):
    the library's ids == tokenizers' on documents."""
    tk = pytest.importorskip("tokenizers")
    from harness.rank import RankEncoder
    from harness.vocab import from_hf

    docs = []
    for path in corpus_files:
        for doc in corpus_texts(path)[:60]:
            try:
                doc.encode("utf-8")
            except UnicodeEncodeError:
                continue
            docs.append(doc)
    tok = tk.Tokenizer(tk.models.BPE())
    tok.pre_tokenizer = tk.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = tk.decoders.ByteLevel()
    trainer = tk.trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                     initial_alphabet=tk.pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(docs, trainer)
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    ours = RankEncoder(from_hf(path))
    for doc in docs[::3]:
        got, want = ours.encode_ordinary(doc).tolist(), tok.encode(doc).ids
        assert got == want, (_first_diff(got, want), doc[:80])
    assert isinstance(ours.encode_ordinary("x"), np.ndarray)


def test_bench_encode_with_a_published_vocabulary(tmp_path):
    """`asmbpe bench encode --vocab cl100k_base`: every row's ids equal tiktoken's."""
    import json

    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    pytest.importorskip("tiktoken")
    from cli_util import invoke
    from harness.corpora import available, corpora_dir
    from harness.dev.bench_encode import installed

    if "english" not in available() or not (VOCABS / "cl100k_base.tiktoken.gz").is_file():
        pytest.skip(f"english.parquet or cl100k_base.tiktoken.gz not found ({corpora_dir()})")
    out = tmp_path / "rows.json"
    r = invoke("bench", "encode", "--vocab", "cl100k_base", "--limit-mb", 0.2, "--runs", 1,
               "--threads", 2, "--json", out)
    assert r.exit_code == 0, r.output
    rows = json.loads(out.read_text())
    names = [n for n in ("tiktoken", "asmbpe", "gigatoken", "bpe-openai") if installed(n)]
    assert [(row["impl"], row["threads"]) for row in rows] == [(n, t) for n in names for t in (1, 2)]
    assert all(row["ids_equal"] is True and row["docs_differ"] == 0 for row in rows), rows
    assert all(row["load_s"] > 0 for row in rows), rows
    assert "= tiktoken" in r.output


def test_own_vocabulary_through_the_rank_encoder(corpus_files, corpus_texts):
    """SPEC §11: for a vocabulary asmbpe trained, merge order and rank order coincide:
    its merges given to the rank encoder (priority = merge number, no whole chunks)
    encode every sampled document as Tokenizer.encode does (SPEC §6's encoder)."""
    import harness
    from harness.rank import RankEncoder
    from harness.vocab import Vocab

    docs = [d for path in corpus_files for d in corpus_texts(path)[:200]]
    tok = harness.train(docs[::2], vocab_size=4096).tokenizer
    tokens = tok.id_to_bytes()[:256 + tok.n_merges]
    v = Vocab("own", tokens, tok.pretokenizer, {}, [tuple(m) for m in tok.merges.tolist()], False)
    ours = RankEncoder(v)
    for doc in docs:
        got, want = ours.encode_ordinary(doc).tolist(), tok.encode(doc).tolist()
        assert got == want, (_first_diff(got, want), doc[:80])


def _overflow_text(seed: int) -> str:
    """Text whose distinct chunks outnumber every per-thread table of the rank encoder
    (asm/encode_rank.inc): 600,000 short words (the chunk table: 2^20 entries, filled to
    5/8, a copy of the seed again when full), 200,000 chunks of four rare CJK letters
    (5..12 ids each: the chunk table's arena of 2^20 ids) and 170,000 words of 20
    letters (the long-chunk table: 2^18 entries filled to 5/8)."""
    import random
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    short = [" " + "".join(rng.choices(letters, k=6)) for _ in range(600_000)]
    cjk = [" " + "".join(chr(rng.randrange(0x4E00, 0x9FA0)) for _ in range(4))
           for _ in range(200_000)]
    long = [" " + "".join(rng.choices(letters, k=20)) for _ in range(170_000)]
    return "".join(short + cjk + long)


@pytest.mark.parametrize("grow", [True, False], ids=["grown", "reset"])
def test_ids_stay_exact_when_the_tables_fill(loaded, grow):
    """Enough distinct chunks to fill the chunk table, its arena and the long-chunk
    table: the first two double when full (or, with grow=False, go back to the
    vocabulary's seed), the third is emptied. The ids equal tiktoken's on the first
    encode and on a second one over the refilled tables."""
    from harness.rank import RankEncoder
    ours, enc = loaded
    ours = RankEncoder(ours.vocab, grow=grow)
    text = _overflow_text(2026)
    want = enc.encode_ordinary(text)
    for attempt in ("first", "again"):
        got = ours.encode_ordinary(text).tolist()
        assert got == want, (attempt, _first_diff(got, want))


def _put_off_docs(seed: int) -> list[str]:
    """Documents whose new chunks (chunk-table misses) pass F puts off and merges
    into the room it kept for them (log R61): a new word as the whole document (its
    room exactly its bytes), new words at the very end of a document after a run of
    seen ones (the last batch, the room's end), new words of many ids (the arena)
    between seen ones, and batches where every chunk is new."""
    import random
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def word(k):
        return " " + "".join(rng.choices(letters, k=k))

    seen = " the cat sat on the mat"
    docs = []
    for _ in range(200):
        docs.append(word(rng.randrange(2, 15)).lstrip())
        docs.append(seen * rng.randrange(1, 40) + "".join(word(rng.randrange(3, 14))
                                                          for _ in range(rng.randrange(1, 5))))
        docs.append("".join(seen + word(15) + " " + "".join(rng.choices("qxzj", k=11))
                            for _ in range(rng.randrange(1, 6))))
        docs.append("".join(word(rng.randrange(3, 14)) for _ in range(rng.randrange(60, 140))))
    return docs


@pytest.mark.parametrize("threads", [1, 2])
def test_ids_equal_tiktoken_where_misses_are_put_off(loaded, threads):
    from harness.rank import RankEncoder
    ours, enc = loaded
    ours = RankEncoder(ours.vocab)                 # (empty tables: every word new)
    docs = _put_off_docs(61 + threads)
    ids, counts = ours.encode_many(docs, threads)
    bounds = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    for i, doc in enumerate(docs):
        got = ids[bounds[i]:bounds[i + 1]].tolist()
        want = enc.encode_ordinary(doc)
        assert got == want, (i, doc[:60], _first_diff(got, want))
