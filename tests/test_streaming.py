"""Streaming with bounded memory (`--memory`): `asmbpe encode` of an input about four
times larger than the budget stays within it (peak RSS of the subprocess, over the
same command on a tiny input), and the budget changes neither the .tok bytes nor the
learned merges."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli_util import invoke, one_line_error

import harness
from harness.corpora import budget_batch_bytes, parse_size, read_documents

MB = 10 ** 6


@pytest.fixture(scope="module")
def english(corpus_files) -> Path:
    p = next((f for f in corpus_files if f.name == "english.parquet"), None)
    if p is None:
        pytest.skip("english.parquet not found")
    return p


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory, english) -> Path:
    p = tmp_path_factory.mktemp("stream") / "tok.bin"
    harness.train(read_documents(english, 3 * MB), 4096).tokenizer.save(p)
    return p


def write_repeated(english: Path, out: Path, total: int, row_group: int) -> tuple[int, int]:
    """`total` bytes of english text (its first 57 MB, repeated) as Parquet with row groups
    of about `row_group` bytes; (documents, text bytes)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    col = pq.ParquetFile(english).read_row_groups([0, 1], columns=["text"]) \
        .column("text").combine_chunks()
    lens = pc.binary_length(col).to_numpy()
    docs = size = 0
    with pq.ParquetWriter(out, pa.schema([("text", pa.string())]), compression="snappy") as w:
        while size < total:
            start = acc = 0
            for i, n in enumerate(lens):
                acc += int(n)
                if acc >= row_group or i == len(lens) - 1:
                    w.write_table(pa.table({"text": col.slice(start, i + 1 - start)}))
                    start, acc = i + 1, 0
            docs += len(lens)
            size += int(lens.sum())
    return docs, size


def peak_rss(args) -> int:
    """Peak RSS (bytes) of `asmbpe ARGS` run in a fresh subprocess."""
    code = ("import resource, subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'harness.cli'] + sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
            "sys.exit(r.returncode)\n")
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                       text=True, cwd=Path(__file__).resolve().parents[1], timeout=120)
    assert r.returncode == 0, r.stderr
    return int(r.stdout.strip().splitlines()[-1]) * 1024


@pytest.mark.slow
def test_encode_input_four_times_the_budget_stays_within_it(tmp_path, english, tok_path):
    budget = parse_size("96M")
    big = tmp_path / "big.parquet"
    docs, size = write_repeated(english, big, 4 * budget, 4 * MB)
    assert size >= 4 * budget
    import pyarrow as pa
    import pyarrow.parquet as pq

    small = tmp_path / "small.parquet"                  # same imports, same encoder
    pq.write_table(pa.table({"text": [d.decode() for d in read_documents(english, 200_000)]}),
                   small)
    base = peak_rss(["encode", small, "-t", tok_path, "-o", tmp_path / "s.tok",
                     "--memory", "96M", "-q"])
    peak = peak_rss(["encode", big, "-t", tok_path, "-o", tmp_path / "big.tok",
                     "--memory", "96M", "-q"])
    from harness.tokfile import read_tok

    tf = read_tok(tmp_path / "big.tok")
    assert (tf.n_documents, tf.source_bytes) == (docs, size)
    # the interpreter, numpy, pyarrow and the library (the tiny run) plus the budget
    assert peak - base <= budget, (peak / MB, base / MB)
    assert peak < size / 2
    print(f"peak RSS {peak / MB:.0f} MB (tiny input {base / MB:.0f} MB), budget "
          f"{budget / MB:.0f} MB, input {size / MB:.0f} MB")


def test_memory_budget_does_not_change_output(tmp_path, english, tok_path):
    docs = read_documents(english, 6 * MB)
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "six.parquet"
    pq.write_table(pa.table({"text": [d.decode("utf-8", "surrogatepass") for d in docs]}),
                   src, row_group_size=40)
    r1 = invoke("encode", src, "-t", tok_path, "-o", tmp_path / "a.tok", "-q")
    r2 = invoke("encode", src, "-t", tok_path, "-o", tmp_path / "b.tok", "-q",
                "--memory", "48M")                     # ~1.6 MB batches
    assert r1.exit_code == 0 and r2.exit_code == 0, r1.output + r2.output
    assert (tmp_path / "a.tok").read_bytes() == (tmp_path / "b.tok").read_bytes()
    ref = harness.train(docs, 1024)
    r = invoke("train", src, "-o", tmp_path / "t.bin", "--vocab-size", 1024, "--memory",
               "48M", "-q")
    assert r.exit_code == 0, r.output
    assert np.array_equal(harness.Tokenizer.load(tmp_path / "t.bin").merges, ref.merges)


def test_budget_errors(tmp_path, english, tok_path):
    assert budget_batch_bytes(parse_size("120M"), "encode") == parse_size("96M") // 10
    one = tmp_path / "one.txt"
    one.write_bytes(b"word " * 2_000_000)                  # 10 MB, one document
    r = invoke("encode", one, "-t", tok_path, "-o", tmp_path / "o.tok", "--memory", "48M")
    one_line_error(r, "--separator")
    r = invoke("encode", english, "-t", tok_path, "-o", tmp_path / "o.tok", "--memory", "64M")
    one_line_error(r, "row group")                         # 26 MB row groups
    r = invoke("train", english, "-o", tmp_path / "t.bin", "--memory", "lots")
    one_line_error(r, "bad size")
    assert not list(tmp_path.glob("*.tok")) and not (tmp_path / "t.bin").exists()
