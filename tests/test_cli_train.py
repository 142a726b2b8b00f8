"""`asmbpe train` and `asmbpe bench train`: tokenizer.bin written atomically and loadable,
progress and summary, and one-line errors (exit 1, no partial file) on bad input."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from cli_util import invoke
from cli_util import one_line_error as _one_line_error


def one_line_error(result, needle: str) -> None:
    _one_line_error(result, needle, progress_ok=True)     # progress lines may precede

import harness
from harness.dev.bench_train import ROW_KEYS, installed
from harness.corpora import available, corpora_dir
from harness.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
KJV = ROOT / "datasets" / "kjv.txt"




@pytest.fixture
def text_file(tmp_path) -> Path:
    p = tmp_path / "kjv.txt"
    p.write_bytes(KJV.read_bytes()[:150_000])
    return p


def test_train_small_file(tmp_path, text_file):
    out = tmp_path / "tokenizer.bin"
    r = invoke("train", text_file, "-o", out, "--vocab-size", 1000, "--threads", 2)
    assert r.exit_code == 0, r.output
    tok = Tokenizer.load(out)
    assert tok.vocab_size == 1000 and tok.n_merges == 1000 - 272
    assert tok == harness.train(text_file.read_bytes(), 1000).tokenizer
    assert not (tmp_path / "tokenizer.bin.tmp").exists()
    assert not list(tmp_path.glob(".*.tmp"))       # write_atomic's temporary name
    stdout = r.stdout.splitlines()
    assert len(stdout) == 2
    assert stdout[0].startswith("trained 0.1 MB, 1 docs, ")
    assert "728 merges learned" in stdout[0] and "MB/s" in stdout[0] and str(out) in stdout[0]
    assert stdout[1].startswith("phases: read ") and "merge loop" in stdout[1]
    assert "counted 0.1 MB" in r.stderr
    assert "merges/s), last winning count" in r.stderr


def test_train_command_never_imports_numpy(tmp_path, text_file):
    """`asmbpe train` of text and of Parquet (read by harness.parquet_pages) runs
    without importing numpy (60-80 ms of every command: harness/_lazy.py); the
    tokenizer it writes is the one harness.train learns, and loads."""
    import subprocess
    import sys

    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    parquet = tmp_path / "kjv.parquet"
    lines = text_file.read_bytes().decode().splitlines()
    pq.write_table(pa.table({"text": lines}), parquet, use_dictionary=False,
                   compression="zstd")
    code = ("import sys\n"
            "from harness.cli import main\n"
            "try:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    assert not e.code, e.code\n"
            "print('numpy imported:', 'numpy' in sys.modules, file=sys.stderr)\n")
    for src in (text_file, parquet):
        out = tmp_path / (src.stem + src.suffix + ".bin")
        r = subprocess.run([sys.executable, "-c", code, "train", str(src), "-o", str(out),
                            "--vocab-size", "600", "--threads", "2"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "last winning count" in r.stderr                 # progress, not -q
        assert "numpy imported: False" in r.stderr, r.stderr
        tok = Tokenizer.load(out)
        docs = lines if src == parquet else [text_file.read_bytes()]
        assert tok == harness.train(docs, 600, threads=2).tokenizer


def test_train_formats_and_several_inputs(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    docs = [d for d in KJV.read_text().split("\n\n") if d.strip()][:400]
    jl = tmp_path / "a.jsonl.gz"
    with gzip.open(jl, "wt", encoding="utf-8") as f:
        for d in docs[:200]:
            f.write(json.dumps({"text": d}) + "\n")
    pqf = tmp_path / "b.parquet"
    pq.write_table(pa.table({"text": docs[200:]}), pqf, row_group_size=50)
    txt = tmp_path / "c.txt"
    txt.write_text("\n---\n".join(docs[:50]) + "\n")
    out = tmp_path / "t.bin"
    r = invoke("train", jl, pqf, txt, "-o", out, "--vocab-size", 800, "--separator", "---")
    assert r.exit_code == 0, r.output
    expect = harness.train([d.encode() for d in docs] + [
        (d + "\n").encode() for d in docs[:50]], 800)
    assert Tokenizer.load(out) == expect.tokenizer
    assert "450 docs" in r.stdout


def test_train_verify_naive_quiet(tmp_path, text_file):
    out = tmp_path / "t.bin"
    for flags in (["--verify"], ["--naive"], ["--quiet", "--max-word-bytes", 0,
                                              "--min-count", 3]):
        r = invoke("train", text_file, "-o", out, "--vocab-size", 500, *flags)
        assert r.exit_code == 0, r.output
        assert Tokenizer.load(out).n_merges == 500 - 272
    assert r.stderr == "" and len(r.stdout.splitlines()) == 2


def test_train_no_pairs_writes_empty_tokenizer(tmp_path):
    f = tmp_path / "bytes.txt"
    f.write_bytes(b"a\nb\nc\n1\n2\n")
    out = tmp_path / "t.bin"
    r = invoke("train", f, "-o", out, "--vocab-size", 1000)
    assert r.exit_code == 0, r.output
    tok = Tokenizer.load(out)
    assert tok.n_merges == 0 and tok.vocab_size == 272
    assert "no pair to merge" in r.stderr and "0 merges" in r.stderr
    assert "0 merges learned" in r.stdout


def test_train_stops_early_says_so(tmp_path):
    f = tmp_path / "small.txt"
    f.write_bytes(b"hello world, hello there")
    out = tmp_path / "t.bin"
    r = invoke("train", f, "-o", out)
    assert r.exit_code == 0, r.output
    tok = Tokenizer.load(out)
    assert 0 < tok.n_merges < 100
    assert f"stopped early after {tok.n_merges} of 32496 merges" in r.stderr
    assert f"vocab_size is {tok.vocab_size}" in r.stderr
    v = tok.vocab_size
    assert f"the specials are ids {v - 16}..{v - 1} (<|bos|> {v - 16})" in r.stderr
    assert tok.special_id("<|bos|>") == v - 16
    import harness
    result = harness.train([b"hello world, hello there"], vocab_size=32768)
    assert result.stopped_early and result.merges_asked == 32496
    assert result.n_merges == tok.n_merges and "stopped early" in repr(result)
    assert not harness.train([b"ab"], vocab_size=257 + 16).stopped_early


@pytest.mark.parametrize("args, needle", [
    (["--vocab-size", 271], "vocab_size must be between 272 and 1048576, got 271"),
    (["--vocab-size", 1048577], "vocab_size must be between 272 and 1048576, got 1048577"),
    (["--threads", 0], "threads must be between 1 and 256, got 0"),
    (["--threads", -2], "threads must be between 1 and 256, got -2"),
    (["--max-word-bytes", -1], "max_word_bytes must be >= 0"),
    (["--min-count", -1], "min_count must be between 0 and 18446744073709551615, got -1"),
])
def test_train_bad_arguments(tmp_path, text_file, args, needle):
    out = tmp_path / "t.bin"
    one_line_error(invoke("train", text_file, "-o", out, *args), needle)
    assert not out.exists() and not (tmp_path / "t.bin.tmp").exists()
    assert not list(tmp_path.glob(".*.tmp"))       # write_atomic's temporary name


def test_train_bad_inputs(tmp_path, text_file):
    out = tmp_path / "t.bin"
    out.write_bytes(b"old content")                     # left as it is on every error
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"text": "also fine"}\n{oops\n')
    blank = tmp_path / "blank.jsonl"
    blank.write_text('{"text": ""}\n{"text": ""}\n')
    cases = [
        ([tmp_path / "missing.txt"], "missing.txt: no such file"),
        ([empty], "empty.txt: is empty"),
        ([text_file, empty], "empty.txt: is empty"),
        ([tmp_path], "is a directory"),
        ([bad], "bad.jsonl:3: not valid JSON"),
        ([blank], "no text in the input (2 empty document(s)); nothing written"),
    ]
    for inputs, needle in cases:
        one_line_error(invoke("train", *inputs, "-o", out, "--vocab-size", 300), needle)
        assert out.read_bytes() == b"old content"
        assert not (tmp_path / "t.bin.tmp").exists()
        assert not list(tmp_path.glob(".*.tmp"))       # write_atomic's temporary name


def test_train_bad_output(tmp_path, text_file):
    one_line_error(invoke("train", text_file, "-o", tmp_path), "is a directory")
    one_line_error(invoke("train", text_file, "-o", tmp_path / "no" / "t.bin"),
                   "does not exist")


def test_train_requires_inputs_and_output(tmp_path, text_file):
    assert invoke("train", "-o", tmp_path / "t.bin").exit_code == 2       # click usage
    assert invoke("train", text_file).exit_code == 2
    r = invoke("train", "--help")
    assert r.exit_code == 0 and "--vocab-size" in r.output and "--verify" in r.output


# --------------------------------------------------------------------- bench train

def test_bench_train_smoke(tmp_path):
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    if "english" not in available():
        pytest.skip(f"english.parquet not found in {corpora_dir()}")
    out = tmp_path / "rows.json"
    r = invoke("bench", "train", "--limit-mb", 1, "--vocab-size", 600, "--runs", 1,
               "--threads", 2, "--json", out, "--pretokenizer", "seed")
    assert r.exit_code == 0, r.output
    rows = json.loads(out.read_text())
    impls = [row["impl"] for row in rows]
    expect = ["asmbpe", "asmbpe (command)"] + [label for name, label in (
        ("rustbpe", "rustbpe"), ("tokenizers", "tokenizers"),
        ("gigatoken", "gigatoken (own pattern)"), ("gigabpe", "gigabpe (GPT-2 pattern)"))
        if installed(name)]
    assert impls == expect
    from harness.dev.bench_train import LABELS
    for name in ("rustbpe", "tokenizers", "gigatoken", "gigabpe"):
        if not installed(name):
            assert f"{LABELS.get(name, name)}: not installed" in r.output
    for row in rows:
        assert list(row) == list(ROW_KEYS)
        assert row["task"] == "train" and row["corpus"] == "english"
        assert row["threads"] == 2 and row["bytes"] >= 1_000_000
        assert row["median_s"] > 0 and row["peak_rss_mb"] > 1
        assert row["cpu_s"] is None if row["impl"] == "asmbpe (command)" else row["cpu_s"] >= 0
        assert row["process_s"] > row["median_s"] * 0.5 and row["process_rss_mb"] > 1
    assert rows[0]["merges_equal"] is True and rows[1]["merges_equal"] is True
    if "rustbpe" in impls:
        assert rows[impls.index("rustbpe")]["merges_equal"] is True
    assert "call/asm" in r.output and "proc/asm" in r.output and "wrote" in r.output
    assert "pre-tokenizer seed (id 1)" in r.output


def test_bench_train_runs_round_by_round(text_file, monkeypatch):
    """The runs go round by round (every implementation once, then again), so that a
    machine that changes speed from minute to minute slows each one alike; an
    implementation that fails is left out of the later rounds."""
    from harness.dev import bench_train as bt

    calls = []

    def fake_run(impl, blob, vocab_size, threads, tmp, timeout, pretokenizer):
        calls.append(impl)
        if impl == "gigabpe":
            return dict(error="exit status 1: broken")
        return dict(wall_s=1.0, cpu_s=1.0, peak_rss_bytes=1 << 20, process_s=1.5,
                    process_rss_bytes=1 << 20, merges=[b"ab"])

    monkeypatch.setattr(bt, "_run_worker", fake_run)
    monkeypatch.setattr(bt, "installed", lambda impl: True)
    lines = []
    rows = bt.bench_train("english", 0, 300, 3, 1, impls=("asmbpe", "rustbpe", "gigabpe"),
                          out=lines.append, input_path=text_file)
    assert calls == ["asmbpe", "rustbpe", "gigabpe", "asmbpe", "rustbpe", "asmbpe", "rustbpe"]
    assert [r.get("error") for r in rows] == [None, None, "failed"]
    assert any("gigabpe (GPT-2 pattern): run 1 failed" in line for line in lines)


def test_bench_train_bad_arguments(tmp_path, monkeypatch):
    one_line_error(invoke("bench", "train", "--vocab-size", 100, "--runs", 1),
                   "--vocab-size must be between")
    monkeypatch.setenv("ASMBPE_CORPORA", str(tmp_path / "nowhere"))
    one_line_error(invoke("bench", "train", "--runs", 1), "no such file")
