"""The `asmbpe` command line: split, check (its contract with checkasm), bench pretok,
and the one-line errors on bad input. Also the document reader behind them."""
from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from cli_util import invoke, one_line_error

import harness
from harness import _lib
from harness.corpora import InputError, available, corpora_dir, read_documents

ROOT = Path(__file__).resolve().parents[1]
ROW_KEYS = {"impl", "task", "pretokenizer", "corpus", "bytes", "threads", "median_s",
            "mb_per_s"}




# --------------------------------------------------------------------------- split

def test_split_spec_example(tmp_path):
    f = tmp_path / "a.txt"
    f.write_bytes(b"Hello world don't $9.99")
    r = invoke("split", "--pretokenizer", "seed", f)
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == b"Hello| world| don|'t| $|9|.|99\n"


def test_split_raw_bytes(tmp_path):
    data = b"caf\xc3\xa9 \xff\xfe\x00 x  \n\n  y\xe2\x82"      # invalid UTF-8, NUL, cut char
    f = tmp_path / "b.bin"
    f.write_bytes(data)
    r = invoke("split", f)
    assert r.exit_code == 0, r.output
    assert r.stdout_bytes == b"|".join(harness.split(data)) + b"\n"         # nanochat
    assert r.stdout_bytes[:-1].replace(b"|", b"") == data        # no | in data: lossless


def test_split_subprocess(tmp_path):
    f = tmp_path / "c.txt"
    f.write_bytes("emoji 😀😀 ok\n日本語のテキスト。".encode())
    p = subprocess.run([sys.executable, "-m", "harness.cli", "split", "--pretokenizer", "seed",
                        str(f)], capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stderr == b""
    assert p.stdout == "emoji| 😀😀| ok|\n|日本語のテキスト|。\n".encode()


def test_split_subprocess_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "harness.cli", "split", str(tmp_path / "nope")],
                       capture_output=True, cwd=ROOT, timeout=60)
    assert p.returncode == 1
    assert p.stdout == b""
    assert p.stderr.decode().splitlines() == [f"asmbpe: error: {tmp_path / 'nope'}: no such file"]


def test_split_missing(tmp_path):
    one_line_error(invoke("split", tmp_path / "missing.txt"), "no such file")


def test_split_directory(tmp_path):
    one_line_error(invoke("split", tmp_path), "is a directory")


def test_split_empty(tmp_path):
    f = tmp_path / "empty.txt"
    f.write_bytes(b"")
    one_line_error(invoke("split", f), "is empty")


@pytest.mark.skipif(os.geteuid() == 0, reason="root can read a chmod 000 file")
def test_split_unreadable(tmp_path):
    f = tmp_path / "secret.txt"
    f.write_bytes(b"hello")
    f.chmod(0)
    try:
        one_line_error(invoke("split", f), "cannot read")
    finally:
        f.chmod(0o644)


def test_split_read_error(tmp_path, monkeypatch):
    """The read failing after the checks (as for an unreadable file when not root)."""
    f = tmp_path / "a.txt"
    f.write_bytes(b"hello")

    def refuse(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", refuse)
    one_line_error(invoke("split", f), "cannot read: Permission denied")


def test_split_library_not_built(tmp_path, monkeypatch):
    f = tmp_path / "a.txt"
    f.write_bytes(b"hello")
    monkeypatch.setattr(_lib, "LIB_PATH", tmp_path / "libasmbpe.so")
    _lib.lib.cache_clear()
    try:
        one_line_error(invoke("split", f), "python build.py")
    finally:
        _lib.lib.cache_clear()


# --------------------------------------------------------------------------- help

@pytest.mark.parametrize("cmd", [[], ["split"], ["check"], ["bench"], ["bench", "pretok"]])
def test_help(cmd):
    for flag in ("--help", "-h"):
        r = invoke(*cmd, flag)
        assert r.exit_code == 0, r.output
        assert r.output.startswith("Usage: asmbpe")


def test_version():
    from harness._version import __version__

    r = invoke("--version")
    assert r.exit_code == 0, r.output
    assert r.stdout == f"asmbpe {__version__}\n"
    assert __version__ == harness.__version__


def test_imports_stay_light():
    """`import harness` loads neither numpy nor cffi nor click, and the command line
    loads no development tool (harness.dev) until a check, bench or profile runs, nor
    any command's module until that command is looked up (log T115); `harness.train`
    stays the function once the submodule harness/train.py is loaded."""
    code = ("import importlib, sys, harness\n"
            "heavy = {'numpy', 'cffi', 'click'}\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
            "import harness.cli\n"
            "print(sorted(m for m in sys.modules if m.startswith('harness.dev')))\n"
            "commands = ['harness.cli.' + m for m in ('data', 'dev', 'encode', 'train')]\n"
            "print([m for m in commands if m in sys.modules])\n"
            "harness.cli.asmbpe.get_command(None, 'train')\n"
            "print([m for m in commands if m in sys.modules])\n"
            "importlib.import_module('harness.train')\n"
            "print(type(harness.train).__name__, 'harness.train' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "[]\n[]\n[]\n['harness.cli.train']\nfunction True\n"


# --------------------------------------------------------------------------- check

def fake_checkasm(monkeypatch, result: bool) -> list:
    calls = []

    def run_checks(seed=None, pattern="*", bench=False, out=print):
        calls.append((seed, pattern, bench))
        return result

    mod = types.ModuleType("harness.dev.checkasm")
    mod.run_checks = run_checks
    monkeypatch.setitem(sys.modules, "harness.dev.checkasm", mod)
    return calls


def test_check_passes_arguments(monkeypatch):
    calls = fake_checkasm(monkeypatch, True)
    assert invoke("check").exit_code == 0
    assert invoke("check", "--seed", 7, "--function", "memeq*", "--bench").exit_code == 0
    assert calls == [(None, "*", False), (7, "memeq*", True)]


def test_check_failure_exit_code(monkeypatch):
    fake_checkasm(monkeypatch, False)
    assert invoke("check", "--seed", 1).exit_code == 1


# --------------------------------------------------------------------------- bench

def test_bench_pretok_json(tmp_path):
    pytest.importorskip("regex", reason="the oracle needs the regex module")
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    if not corpora_dir().is_dir():
        pytest.skip(f"corpora directory not found: {corpora_dir()} (shared/ next to the repo)")
    names = available()
    if not names:
        pytest.skip(f"no corpus .parquet file in {corpora_dir()}")
    out = tmp_path / "out.json"
    r = invoke("bench", "pretok", "--corpus", names[0], "--limit-mb", "0.2",
               "--twin-mb", "0.05", "--runs", "1", "--json", out, "--pretokenizer", "seed")
    assert r.exit_code == 0, r.output
    assert "WARNING" not in r.output
    assert "asm/oracle" in r.output and "asm/twin" in r.output
    rows = json.loads(out.read_text())
    assert not (tmp_path / "out.json.tmp").exists()
    assert not list(tmp_path.glob(".*.tmp"))       # write_atomic's temporary name
    assert "public/asm" in r.output
    assert [row["impl"] for row in rows] == ["asm", "public", "oracle", "twin"]
    for row in rows:
        assert set(row) == ROW_KEYS
        assert row["task"] == "pretok" and row["corpus"] == names[0] and row["threads"] == 1
        assert row["pretokenizer"] == "seed"
        assert row["median_s"] > 0 and row["mb_per_s"] > 0
    assert rows[0]["bytes"] == rows[1]["bytes"] == rows[2]["bytes"] >= 200_000
    assert 0 < rows[3]["bytes"] <= 50_000


def test_bench_pretok_web_english(tmp_path):
    """web-english: english with typographic quotes and dashes, split alike by the
    library and the oracle (the bench warns when their chunk counts differ)."""
    pytest.importorskip("regex", reason="the oracle needs the regex module")
    pytest.importorskip("pyarrow", reason="reading the Parquet corpora needs pyarrow")
    if "english" not in available():
        pytest.skip(f"english.parquet not found in {corpora_dir()}")
    r = invoke("bench", "pretok", "--corpus", "web-english", "--limit-mb", "0.3",
               "--twin-mb", "0.01", "--runs", "1")
    assert r.exit_code == 0, r.output
    assert "web-english, nanochat:" in r.output and "WARNING" not in r.output
    from harness.dev.bench import web_english
    (doc,) = web_english([b'He said "don\'t" - twice.'])
    assert doc == "He said \u201cdon\u2019t\u201d \u2014 twice.".encode()


def test_bench_pretok_no_corpora(tmp_path, monkeypatch):
    monkeypatch.setenv("ASMBPE_CORPORA", str(tmp_path / "nowhere"))
    one_line_error(invoke("bench", "pretok", "--runs", "1"), "corpora directory not found")


# --------------------------------------------------------------------------- reader

def test_read_documents_formats(tmp_path):
    plain = tmp_path / "a.txt"
    plain.write_bytes(b"one\n\ntwo\xff\n")
    assert read_documents(plain) == [b"one\n\ntwo\xff\n"]

    lines = [json.dumps({"text": t}) for t in ("first", "sécond", "third")]
    jl = tmp_path / "b.jsonl"
    jl.write_text("\n".join(lines) + "\n")
    assert read_documents(jl) == [b"first", "sécond".encode(), b"third"]
    assert read_documents(jl, limit_bytes=6) == [b"first", "sécond".encode()]
    gz = tmp_path / "b.jsonl.gz"
    gz.write_bytes(gzip.compress(jl.read_bytes()))
    assert read_documents(gz) == read_documents(jl)


@pytest.mark.filterwarnings("ignore::harness.corpora.NullsSkipped")   # nulls on purpose; tests/test_inputs.py checks the note
def test_read_documents_parquet(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    p = tmp_path / "c.parquet"
    pq.write_table(pa.table({"text": ["x" * 10, None, "yé", "z"]}), p, row_group_size=2)
    assert read_documents(p) == [b"x" * 10, "yé".encode(), b"z"]
    assert read_documents(p, limit_bytes=5) == [b"x" * 10]
    bad = tmp_path / "d.parquet"
    pq.write_table(pa.table({"body": ["a"]}), bad)
    with pytest.raises(InputError, match="no 'text' column"):
        read_documents(bad)


@pytest.mark.parametrize("kind", ["missing", "directory", "empty", "bad json", "no text"])
def test_read_documents_errors(tmp_path, kind):
    p = tmp_path / "x.jsonl"
    if kind == "directory":
        p.mkdir()
    elif kind == "empty":
        p.write_bytes(b"")
    elif kind == "bad json":
        p.write_text('{"text": "ok"}\n{oops\n')
    elif kind == "no text":
        p.write_text('{"body": "ok"}\n')
    with pytest.raises(InputError) as e:
        read_documents(p)
    assert "\n" not in str(e.value) and str(p) in str(e.value)
