"""`asmbpe bench scaling` (harness/dev/scaling.py): the prepared thread-scaling run of
issue 24, here on a small input: every thread count learns the same merges and encodes
the same ids, the table and the JSON rows say so, and bad --threads are refused."""
from __future__ import annotations

import json

import pytest

from harness.dev.scaling import ROW_KEYS, scaling

from cli_util import invoke, one_line_error


def test_scaling_rows_on_small_documents():
    docs = [b"the quick brown fox jumps over the lazy dog\n" * 40,
            "naïve café — 日本語のテキスト\n".encode() * 30, b"x = f(y) + 12345;\n" * 50] * 5
    lines: list[str] = []
    rows = scaling(docs, 600, threads=(1, 2, 3), runs=1, out=lines.append)
    assert [r["threads"] for r in rows] == [1, 2, 3]
    for r in rows:
        assert set(ROW_KEYS) <= set(r)
        assert r["merges_equal"] and r["ids_equal"]
        assert r["train_s"] > 0 and r["encode_s"] > 0
    assert rows[0]["train_speedup"] == pytest.approx(1.0)
    assert lines[0].startswith("scaling:") and len(lines) == 2 + 3


def test_scaling_command(tmp_path):
    src = tmp_path / "docs.txt"
    src.write_text("Some text to train on.\n\nAnother document, with words.\n\n" * 200)
    out = tmp_path / "rows.json"
    r = invoke("bench", "scaling", "--input", str(src), "--separator", "", "--vocab-size",
               "400", "--threads", "1,2", "--runs", "1", "--json", str(out))
    assert r.exit_code == 0, r.output
    assert "scaling:" in r.output
    rows = json.loads(out.read_text())
    assert [row["threads"] for row in rows] == [1, 2]


@pytest.mark.parametrize("bad, message", [("1,x", "numbers separated by commas"),
                                          (",", "names no thread count"),
                                          ("1,0", "threads")])
def test_scaling_bad_threads(tmp_path, bad, message):
    src = tmp_path / "docs.txt"
    src.write_text("text " * 100)
    r = invoke("bench", "scaling", "--input", str(src), "--threads", bad)
    one_line_error(r, message)
