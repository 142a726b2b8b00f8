"""Conventions of the `asmbpe` command that every subcommand shares (issue 23): benches
on the user's own file (`--input`), `-q`, `--json` output of stats, `split --format`,
quiet exits into a closed pipe, one bound for --threads, --min-count checked first."""
from __future__ import annotations

import json

import pytest

import harness

from cli_util import invoke, one_line_error

TEXT = ("The quick brown fox jumps over the lazy dog. " * 40 + "\n\n"
        + "Ünïcödé words, 数字 123 and code() { return x; }\n" * 30)


@pytest.fixture
def text_file(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text(TEXT * 20)
    return f


# ------------------------------------------------------------------- bench --input

def test_bench_pretok_on_an_input_file(tmp_path, text_file, monkeypatch):
    pytest.importorskip("regex", reason="the oracle needs the regex module")
    monkeypatch.setenv("ASMBPE_CORPORA", str(tmp_path / "nowhere"))   # no shared corpora needed
    out = tmp_path / "rows.json"
    r = invoke("bench", "pretok", "--input", text_file, "--runs", 1, "--twin-mb", 0.01,
               "--json", out)
    assert r.exit_code == 0, r.output
    assert "mine.txt, nanochat:" in r.output and "WARNING" not in r.output
    rows = json.loads(out.read_text())
    assert {row["corpus"] for row in rows} == {"mine.txt"}
    assert rows[0]["bytes"] == text_file.stat().st_size


def test_bench_train_on_an_input_file(tmp_path, text_file, monkeypatch):
    monkeypatch.setenv("ASMBPE_CORPORA", str(tmp_path / "nowhere"))
    out = tmp_path / "rows.json"
    r = invoke("bench", "train", "--input", text_file, "--separator", "", "--runs", 1,
               "--vocab-size", 400, "--threads", 1, "--impl", "asmbpe", "--json", out)
    assert r.exit_code == 0, r.output
    (row,) = json.loads(out.read_text())
    assert row["corpus"] == "mine.txt" and row["impl"] == "asmbpe"
    assert row["bytes"] < text_file.stat().st_size      # the blank lines separate documents


def test_bench_encode_on_an_input_file(tmp_path, text_file, monkeypatch):
    monkeypatch.setenv("ASMBPE_CORPORA", str(tmp_path / "nowhere"))
    out = tmp_path / "rows.json"
    r = invoke("bench", "encode", "--input", text_file, "--runs", 1, "--vocab-size", 400,
               "--threads", 2, "--impl", "asmbpe", "--json", out)
    assert r.exit_code == 0, r.output
    rows = json.loads(out.read_text())
    assert {row["corpus"] for row in rows} == {"mine.txt"}
    assert [row["threads"] for row in rows] == [1, 2]


def test_bench_input_errors(tmp_path, text_file):
    one_line_error(invoke("bench", "encode", "--input", tmp_path / "missing.txt", "--runs", 1),
                   "no such file")
    one_line_error(invoke("bench", "pretok", "--input", text_file, "--corpus", "english"),
                   "not both")


# --------------------------------------------------------------- stats, split output

def _tokenizer(tmp_path, text_file):
    tok = tmp_path / "tok.bin"
    r = invoke("train", text_file, "-o", tok, "--vocab-size", 400, "-q")
    assert r.exit_code == 0, r.output
    return tok


def test_stats_json(tmp_path, text_file):
    tok = _tokenizer(tmp_path, text_file)
    r = invoke("stats", "--json", "--top", 3, "-t", tok, text_file)
    assert r.exit_code == 0, r.output
    rec = json.loads(r.stdout)
    assert rec["documents"] == 1 and rec["source_bytes"] == text_file.stat().st_size
    assert rec["tokens"] == rec["text_tokens"] + rec["special_tokens"]
    assert rec["special_tokens"] == 1                                   # <|bos|>
    assert len(rec["top"]) == 3 and rec["top"][0]["count"] >= rec["top"][1]["count"]
    t = harness.Tokenizer.load(tok)
    assert rec["tokenizer"]["vocab_size"] == t.vocab_size == rec["vocab_size"]
    assert rec["pretokenizer"].startswith("nanochat")
    table = t.id_to_bytes()
    assert all(bytes.fromhex(t["hex"]) == table[t["id"]] for t in rec["top"])


def test_split_formats(tmp_path):
    data = b"a|b c\xff\xfe  d\n"
    f = tmp_path / "s.txt"
    f.write_bytes(data)
    bar = invoke("split", f)
    assert bar.exit_code == 0 and bar.stdout_bytes == b"a||b| c|\xff\xfe| | d|\n\n"
    lines = invoke("split", "--format", "jsonl", f).stdout.splitlines()
    recs = [json.loads(x) for x in lines]
    assert recs[0] == {"start": 0, "end": 1, "text": "a"}
    assert recs[1] == {"start": 1, "end": 3, "text": "|b"}                # | unambiguous
    assert b"".join(bytes.fromhex(r["hex"]) if "hex" in r else r["text"].encode()
                    for r in recs) == data
    offs = [tuple(map(int, x.split("\t")))
            for x in invoke("split", "--format", "offsets", f).stdout.splitlines()]
    assert offs[0] == (0, 1) and offs[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(offs, offs[1:]))
    assert [data[s:e] for s, e in offs] == [bytes.fromhex(r["hex"]) if "hex" in r
                                            else r["text"].encode() for r in recs]


def test_quiet_on_every_command():
    """Every command that prints more than its result takes -q."""
    from harness.cli import asmbpe

    def commands(group, prefix=()):         # (the group loads its commands' modules
        for name in group.list_commands(None):  # as they are looked up)
            cmd = group.get_command(None, name)
            if hasattr(cmd, "commands"):
                yield from commands(cmd, prefix + (name,))
            else:
                yield prefix + (name,), cmd

    exempt = {("check",), ("bench", "pretok"), ("bench", "train"), ("bench", "encode"),
              ("bench", "ladder"), ("bench", "scaling"),
              ("profile", "train"), ("profile", "encode"), ("profile", "pretok")}
    missing = [" ".join(path) for path, cmd in commands(asmbpe) if path not in exempt
               and not any("-q" in p.opts for p in cmd.params)]
    assert not missing, f"no -q: {missing}"


def test_closed_stdout_ends_quietly(tmp_path, text_file):
    """`asmbpe train|stats ... | head`: exit 0, no "Broken pipe" on stderr."""
    import subprocess
    import sys

    tok = _tokenizer(tmp_path, text_file)
    for args in (["stats", "-t", tok, text_file],
                 ["train", text_file, "-o", tmp_path / "t2.bin", "--vocab-size", 300, "-q"],
                 ["split", text_file]):
        p = subprocess.Popen([sys.executable, "-m", "harness.cli", *map(str, args)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()                        # the reader is gone before anything is written
        err = p.stderr.read().decode()
        assert p.wait(timeout=120) == 0, err
        assert "Broken pipe" not in err and "Traceback" not in err, err


# ------------------------------------------------------------------------- -o -

def test_output_to_stdout(tmp_path, text_file):
    """`-o -` writes the result to stdout (the summary goes to stderr) for train, encode
    and export, the same bytes as a file; nothing is left in $TMPDIR."""
    import os
    import subprocess
    import sys

    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir))

    def run(*args):
        p = subprocess.run([sys.executable, "-m", "harness.cli", *map(str, args)],
                           capture_output=True, env=env, timeout=300)
        assert p.returncode == 0, p.stderr.decode()
        return p

    tok = tmp_path / "tok.bin"
    run("train", text_file, "-o", tok, "--vocab-size", 400, "--threads", 1, "-q")
    p = run("train", text_file, "-o", "-", "--vocab-size", 400, "--threads", 1, "-q")
    assert p.stdout == tok.read_bytes() and b"trained" in p.stderr

    out = tmp_path / "a.tok"
    run("encode", text_file, "-t", tok, "-o", out, "-q")
    p = run("encode", text_file, "-t", tok, "-o", "-", "-q")
    assert p.stdout == out.read_bytes() and b"encoded" in p.stderr

    for fmt in ("tiktoken", "hf", "vocab"):
        f = tmp_path / f"export.{fmt}"
        run("export", "-t", tok, "--format", fmt, "-o", f)
        p = run("export", "-t", tok, "--format", fmt, "-o", "-")
        assert p.stdout == f.read_bytes() and b"wrote" in p.stderr
    assert list(tmpdir.iterdir()) == []
    one_line_error(invoke("encode", text_file, "-t", tok, "-o", "-", "--shards"),
                   "output is a directory")
