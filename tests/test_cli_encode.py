"""`asmbpe encode / decode / show / stats / export / bench encode`: .tok files that
decode back to the text with <|bos|>, chat files with MASKBIT exactly on what the
model learns, one-line errors (exit 1) that leave no output file, and the views."""
from __future__ import annotations

import ast
import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from cli_util import invoke, kjv_tokenizer
from cli_util import one_line_error as _one_line_error

from harness.tokenizer import MASKBIT, Tokenizer
from harness.tokfile import read_tok

ROOT = Path(__file__).resolve().parents[1]
KJV = ROOT / "datasets" / "kjv.txt"
DOCS = ["In the beginning God created the heaven and the earth.",
        "And the earth was without form, and void; ünïcödé ☺ 😀\n\nthe end",
        "",
        "  1 Let there be light: and there was light.\n"]
CHATS = [
    [{"role": "system", "content": "You answer briefly."},
     {"role": "user", "content": "Who created the heaven?"},
     {"role": "assistant", "content": "God, in the beginning."}],
    [{"role": "user", "content": "And the earth?"},
     {"role": "assistant", "content": "Without form, and void."},
     {"role": "user", "content": "Thanks"},
     {"role": "assistant", "content": ""}],
]


def one_line_error(result, needle: str) -> None:
    _one_line_error(result, needle, progress_ok=True)     # progress lines may precede


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> Path:
    """A small tokenizer (vocab 400) trained on the start of the KJV."""
    return kjv_tokenizer(tmp_path_factory.mktemp("tok"), 40_000, 400)


@pytest.fixture(scope="module")
def tok(tok_path) -> Tokenizer:
    return Tokenizer.load(tok_path)


def with_bos(docs) -> str:
    return "".join("<|bos|>" + d for d in docs)


def only(path: Path) -> list[str]:
    """The names in path's directory (to see that no temporary file is left)."""
    return sorted(p.name for p in path.parent.iterdir())


# ----------------------------------------------------------------------- round trips

def test_encode_decode_jsonl_text_parquet(tmp_path, tok_path, tok):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    jl = tmp_path / "a.jsonl.gz"
    jl.write_bytes(gzip.compress("".join(json.dumps({"text": d}) + "\n"
                                         for d in DOCS).encode()))
    txt = tmp_path / "b.txt"
    txt.write_text("\n---\n".join(DOCS[:2]) + "\n")
    pqf = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": DOCS}), pqf, row_group_size=2)
    out = tmp_path / "out.tok"
    r = invoke("encode", jl, txt, pqf, "-t", tok_path, "-o", out, "--separator", "---",
               "--threads", 2)
    assert r.exit_code == 0, r.output
    docs = DOCS + [DOCS[0] + "\n", DOCS[1] + "\n"] + DOCS
    nbytes = sum(len(d.encode()) for d in docs)
    t = read_tok(out, tok)
    assert not t.chat and t.n_documents == len(docs) and t.source_bytes == nbytes
    assert [d.tolist() for d in t.documents()] == [tok.encode(d, bos=True).tolist()
                                                   for d in docs]
    summary = r.stdout.strip()
    assert summary.startswith(f"encoded {len(docs)} documents, 0.0 MB, {t.n_tokens:,} "
                              f"tokens ({len(docs)} special), ")
    assert "bytes/token" in summary and "MB/s" in summary and str(out) in summary
    assert only(out) == ["a.jsonl.gz", "b.txt", "c.parquet", "out.tok"]

    d = invoke("decode", out, "-t", tok_path)
    assert d.exit_code == 0, d.output
    assert d.stdout_bytes.decode() == with_bos(docs)
    assert d.stderr.startswith(f"decoded {t.n_tokens:,} tokens, {len(docs)} documents")
    assert invoke("decode", out, "-t", tok_path, "-q").stderr == ""


def test_encode_same_file_for_any_threads_and_parquet_readers(tmp_path, tok_path):
    """--threads 8 reads Parquet row groups on two threads at once (one reader per four
    encoding threads): the .tok file is the same bytes as with one thread."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from harness.cli.common import _readers

    assert [_readers(t) for t in (1, 2, 3, 4, 7, 8, 16)] == [1, 1, 1, 1, 1, 2, 4]
    lines = KJV.read_text().splitlines()[:600]
    pqf = tmp_path / "k.parquet"
    pq.write_table(pa.table({"text": ["\n".join(lines[i:i + 7]) for i in range(0, 600, 7)]}),
                   pqf, row_group_size=9)
    images = []
    for threads in (1, 3, 8):
        out = tmp_path / f"t{threads}.tok"
        r = invoke("encode", pqf, "-t", tok_path, "-o", out, "--threads", threads, "-q")
        assert r.exit_code == 0, r.output
        images.append(out.read_bytes())
    assert images[0] == images[1] == images[2]


def test_encode_plain_text_file_is_one_document(tmp_path, tok_path, tok):
    f = tmp_path / "kjv.txt"
    f.write_bytes(KJV.read_bytes()[:3000])
    out = tmp_path / "k.tok"
    assert invoke("encode", f, "-t", tok_path, "-o", out, "-q").exit_code == 0
    t = read_tok(out, tok)
    assert t.n_documents == 1 and t.tokens.tolist() == tok.encode(f.read_bytes(),
                                                                  bos=True).tolist()
    assert invoke("decode", out, "-t", tok_path).stdout_bytes == b"<|bos|>" + f.read_bytes()


def test_encode_chat_maskbit(tmp_path, tok_path, tok):
    src = tmp_path / "chat.jsonl"
    src.write_text("".join(json.dumps({"messages": c}) + "\n" for c in CHATS))
    out = tmp_path / "chat.tok"
    r = invoke("encode", "--chat", src, "-t", tok_path, "-o", out)
    assert r.exit_code == 0, r.output
    t = read_tok(out, tok)
    assert t.chat and t.flags == 1 and t.n_documents == 2
    assert t.source_bytes == sum(len(m["content"].encode()) for c in CHATS for m in c)
    sid = tok.special_id
    expect: list[int] = []
    for conv in CHATS:
        expect.append(sid("<|bos|>"))
        for m in conv:
            mask = MASKBIT if m["role"] == "assistant" else 0
            expect.append(sid(f"<|{m['role']}|>"))
            expect.extend(int(i) | mask for i in tok.encode(m["content"]))
            expect.append(sid("<|end|>") | mask)
    assert t.tokens.tolist() == expect
    masked = (t.tokens & MASKBIT) != 0
    assert masked.sum() == sum(len(tok.encode(m["content"])) + 1
                               for c in CHATS for m in c if m["role"] == "assistant")
    specials = sum(1 + 2 * len(c) for c in CHATS)
    assert "encoded 2 conversations" in r.stdout and f"({specials} special)" in r.stdout
    text = invoke("decode", out, "-t", tok_path).stdout
    assert text.startswith("<|bos|><|system|>You answer briefly.<|end|><|user|>Who created")
    assert text.endswith("<|assistant|>Without form, and void.<|end|><|user|>Thanks<|end|>"
                         "<|assistant|><|end|>")


# --------------------------------------------------------------------------- errors

def _make_bad_inputs(tmp_path: Path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"text": "fine"}\n{"text": "fine too"}\n{oops\n')
    no_text = tmp_path / "notext.jsonl"
    no_text.write_text('{"text": "fine"}\n{"body": "x"}\n')
    pq_no_text = tmp_path / "notext.parquet"
    pq.write_table(pa.table({"body": ["a", "b"]}), pq_no_text)
    role = tmp_path / "role.jsonl"
    role.write_text(json.dumps({"messages": CHATS[0]}) + "\n"
                    + json.dumps({"messages": [{"role": "robot", "content": "beep"}]}) + "\n")
    chat_bad = tmp_path / "chatbad.jsonl"
    chat_bad.write_text(json.dumps({"messages": CHATS[0]}) + "\n{\"messages\": 3}\n")
    return [
        ([bad_json], "bad.jsonl:3: not valid JSON"),
        ([no_text], "notext.jsonl:2: no string 'text' field"),
        ([pq_no_text], "notext.parquet: no 'text' column (columns: body)"),
        (["--chat", role], "role.jsonl:2: message 0 has unknown role 'robot'"),
        (["--chat", chat_bad], "chatbad.jsonl:2: no 'messages' list"),
        (["--chat", tmp_path / "plain.txt"], "plain.txt: chat input must be JSONL"),
        ([tmp_path / "missing.jsonl"], "missing.jsonl: no such file"),
    ]


def test_encode_errors_leave_no_output(tmp_path, tok_path):
    (tmp_path / "plain.txt").write_text("hello")
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "out.tok"
    for args, needle in _make_bad_inputs(tmp_path):
        one_line_error(invoke("encode", *args, "-t", tok_path, "-o", out), needle)
        assert list(out_dir.iterdir()) == []
    out.write_bytes(b"old")                                  # an old output stays as it is
    one_line_error(invoke("encode", tmp_path / "bad.jsonl", "-t", tok_path, "-o", out),
                   "bad.jsonl:3")
    assert out.read_bytes() == b"old" and list(out_dir.iterdir()) == [out]


def test_encode_bad_arguments(tmp_path, tok_path):
    f = tmp_path / "a.txt"
    f.write_text("hello")
    out = tmp_path / "o.tok"
    one_line_error(invoke("encode", f, "-t", tok_path, "-o", out, "--threads", 0),
                   "--threads must be between 1 and 256, got 0")
    one_line_error(invoke("encode", f, "-t", f, "-o", out), "a.txt: bad magic")
    one_line_error(invoke("encode", f, "-t", tok_path, "-o", tmp_path), "is a directory")
    big = tmp_path / "big.bin"
    Tokenizer(np.array([[97, 98]] + [[256 + i, 97] for i in range(32600)],
                       dtype=np.uint16)).save(big)
    chat = tmp_path / "c.jsonl"
    chat.write_text(json.dumps({"messages": CHATS[0]}) + "\n")
    one_line_error(invoke("encode", "--chat", chat, "-t", big, "-o", out),
                   "chat encoding needs vocab_size <= 32768")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "big.bin", "c.jsonl"]


def test_decode_refuses_other_tokenizer_and_bad_files(tmp_path, tok_path, tok):
    f = tmp_path / "a.txt"
    f.write_text("hello there")
    out = tmp_path / "a.tok"
    assert invoke("encode", f, "-t", tok_path, "-o", out, "-q").exit_code == 0
    other = tmp_path / "other.bin"
    Tokenizer(tok.merges[:-1]).save(other)
    one_line_error(invoke("decode", out, "-t", other),
                   "a.tok: written by a different tokenizer: hash 0x")
    one_line_error(invoke("stats", out, "-t", other), "written by a different tokenizer")
    one_line_error(invoke("decode", f, "-t", tok_path), "a.txt: bad magic")
    cut = tmp_path / "cut.tok"
    cut.write_bytes(out.read_bytes()[:-1])
    one_line_error(invoke("decode", cut, "-t", tok_path), "an odd length")


def test_ids_that_are_not_tokens(tmp_path, tok_path, tok):
    from harness.tokfile import TokWriter

    bad = tmp_path / "bad.tok"
    with TokWriter(bad, tok.merges_hash) as w:                # the right hash, a bad id
        w.write(np.array([tok.special_id("<|bos|>"), 104, 500], dtype=np.uint16), 1, 2)
    for command in ("decode", "stats"):
        one_line_error(invoke(command, bad, "-t", tok_path), "id 500 at position")
    r = invoke("show", "-t", tok_path, bad)
    assert r.exit_code == 1 and r.stderr.startswith("asmbpe: error: ")
    assert "bad.tok: id 500 at position 2 is not a token" in r.stderr


# ----------------------------------------------------------------------- show, stats

def test_show_plain_and_color(tmp_path, tok_path, tok):
    text = "In the beginning,\n\tGod ☺"
    r = invoke("show", "-t", tok_path, text)
    assert r.exit_code == 0, r.output
    lines = r.stdout.splitlines()
    ids = tok.encode(text).tolist()
    assert [int(ln.split("\t")[0]) for ln in lines] == ids
    values = [ast.literal_eval(ln.split("\t", 1)[1]) for ln in lines]
    assert isinstance(values[-1], bytes)                      # a piece of ☺: a bytes literal
    assert b"".join(v.encode() if isinstance(v, str) else v for v in values) == text.encode()
    f = tmp_path / "t.txt"
    f.write_text(text)
    assert invoke("show", "-t", tok_path, f).stdout == r.stdout        # a file: its text
    c = invoke("show", "-t", tok_path, "--color", text)
    assert c.exit_code == 0 and "\x1b[30;48;5;" in c.stdout and "↵" in c.stdout
    assert f"{len(ids)} tokens" in c.stderr
    assert invoke("show", "-t", tok_path, "--limit", 2, text).stdout.count("\n") == 2


def test_show_chat_tok_marks_maskbit(tmp_path, tok_path, tok):
    src = tmp_path / "chat.jsonl"
    src.write_text(json.dumps({"messages": CHATS[0]}) + "\n")
    out = tmp_path / "c.tok"
    assert invoke("encode", "--chat", src, "-t", tok_path, "-o", out, "-q").exit_code == 0
    lines = invoke("show", "-t", tok_path, out).stdout.splitlines()
    assert lines[0] == f"{tok.special_id('<|bos|>')}\t'<|bos|>'"
    starred = [ln for ln in lines if ln.split("\t")[0].endswith("*")]
    assert len(starred) == len(tok.encode("God, in the beginning.")) + 1
    assert starred[-1] == f"{tok.special_id('<|end|>')}*\t'<|end|>'"
    assert lines[-1] == starred[-1]
    colored = invoke("show", "-t", tok_path, "--color", out).stdout
    assert ";1;4m" in colored                                 # bold, underlined


def test_stats(tmp_path, tok_path, tok):
    f = tmp_path / "d.jsonl"
    f.write_text("".join(json.dumps({"text": d}) + "\n" for d in DOCS))
    out = tmp_path / "d.tok"
    assert invoke("encode", f, "-t", tok_path, "-o", out, "-q").exit_code == 0
    t = read_tok(out, tok)
    nbytes = sum(len(d.encode()) for d in DOCS)
    for target in (out, f):                                   # a .tok file, or the input
        r = invoke("stats", target, "-t", tok_path, "--top", 3)
        assert r.exit_code == 0, r.output
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["documents", "4"]
        assert lines[1].split() == ["source", "bytes", f"{nbytes:,}"]
        assert lines[2].startswith(f"tokens           {t.n_tokens:,} ({t.n_tokens - 4:,} "
                                   "text, 4 special)")
        assert f"{nbytes / (t.n_tokens - 4):.3f}" in lines[3]
        assert lines[5] == "pre-tokenizer    nanochat (id 2)"
        assert lines[6] == "top 3 tokens:"
        counts = np.bincount(t.tokens, minlength=tok.vocab_size)
        top = [int(i) for i in np.argsort(-counts, kind="stable")[:3]]
        assert [int(ln.split()[0]) for ln in lines[8:]] == top
        assert lines[8].split()[1] == f"{counts[top[0]]:,}"


# --------------------------------------------------------------------------- export

def test_export_both_formats(tmp_path, tok_path, tok):
    pytest.importorskip("tiktoken")
    pytest.importorskip("tokenizers")
    from harness.export import load_hf, load_tiktoken

    text = KJV.read_text()[:2000]
    tt = tmp_path / "asmbpe.tiktoken"
    r = invoke("export", "-t", tok_path, "--format", "tiktoken", "-o", tt)
    assert r.exit_code == 0, r.output
    assert r.stdout.startswith("wrote tiktoken export of Tokenizer(vocab_size=400")
    assert load_tiktoken(tt, tok).encode_ordinary(text) == tok.encode(text).tolist()
    hf = tmp_path / "tokenizer.json"
    r = invoke("export", "-t", tok_path, "--format", "hf", "-o", hf)
    assert r.exit_code == 0, r.output
    assert json.loads(hf.read_text())["model"]["type"] == "BPE"
    assert load_hf(hf).encode(text).ids == tok.encode(text).tolist()
    assert invoke("export", "-t", tok_path, "--format", "xml", "-o", hf).exit_code == 2
    one_line_error(invoke("export", "-t", tok_path, "--format", "hf", "-o",
                          tmp_path / "no" / "t.json"), "does not exist")


# ---------------------------------------------------------------------- bench encode

def test_bench_encode_smoke(tmp_path):
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    from harness.dev.bench_encode import LABELS, ROW_KEYS, installed
    from harness.corpora import available, corpora_dir

    if "english" not in available():
        pytest.skip(f"english.parquet not found in {corpora_dir()}")
    out = tmp_path / "rows.json"
    r = invoke("bench", "encode", "--limit-mb", 0.2, "--vocab-size", 512, "--runs", 1,
               "--threads", 2, "--json", out, "--pretokenizer", "seed")
    assert r.exit_code == 0, r.output
    rows = json.loads(out.read_text())
    names = ["asmbpe"] + [n for n in ("tiktoken", "tokenizers", "gigatoken") if installed(n)]
    assert [(row["impl"], row["threads"]) for row in rows] == [
        (LABELS.get(n, n), t) for n in names for t in (1, 2)]
    for row in rows:
        assert list(row) == list(ROW_KEYS)
        assert row["task"] == "encode" and row["corpus"] == "english"
        assert row["bytes"] >= 200_000 and row["median_s"] > 0 and row["mb_per_s"] > 0
        if not row["impl"].startswith("gigatoken"):           # its pattern is GPT-4's
            assert row["ids_equal"] is True and row["docs_differ"] == 0
    assert rows[0]["vs_asmbpe"] == 1.0
    assert "speed/asm" in r.output and f"wrote {len(rows)} rows" in r.output


def test_bench_encode_bad_arguments(tmp_path, monkeypatch):
    one_line_error(invoke("bench", "encode", "--vocab-size", 100, "--runs", 1),
                   "--vocab-size must be between")
    monkeypatch.setenv("ASMBPE_CORPORA", str(tmp_path / "nowhere"))
    one_line_error(invoke("bench", "encode", "--runs", 1), "no such file")


@pytest.mark.parametrize("cmd", [["encode"], ["decode"], ["show"], ["stats"], ["export"],
                                 ["bench", "encode"]])
def test_help(cmd):
    r = invoke(*cmd, "--help")
    assert r.exit_code == 0 and r.output.startswith("Usage: asmbpe"), r.output


@pytest.mark.parametrize("cmd", [["encode"], ["decode"], ["show"], ["stats"], ["export"]])
def test_required_arguments(cmd):
    assert invoke(*cmd).exit_code == 2                       # click's usage error
