"""Conventions of the `asmbpe` command that every subcommand shares (issue 23): benches
on the user's own file (`--input`), `-q`, `--json` output of stats, `split --format`,
quiet exits into a closed pipe, one bound for --threads, --min-count checked first."""
from __future__ import annotations

import json

import pytest

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
