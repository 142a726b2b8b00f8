"""`asmbpe bench ladder` (harness.dev.ladder): every Python rung learns exactly the merges
of harness.train, a rung out of budget is extrapolated and marked so, and the command
writes its JSON rows and its plot. A small built-in text: no shared corpora needed."""
from __future__ import annotations

import json
import random
import sys

import pytest

import harness
from harness.dev import ladder as L

from cli_util import invoke, one_line_error

PNG = b"\x89PNG\r\n\x1a\n"


def _text(n_docs: int = 6, seed: int = 5) -> list[bytes]:
    """A few KB of varied text: repeated words (so ties and counts > 1), runs of one
    letter ("aaaa": overlapping pairs), digits, punctuation, contractions, newlines,
    non-ASCII letters, and a chunk over 256 bytes (left out by every rung)."""
    rng = random.Random(seed)
    vocab = ["the", "a", "aaa", "aaaa", "banana", "naan", "it's", "we'll", "Hello",
             "world", "12345", "3.14", "!!", "--", "\n", "  ", "\t", "é", "日本語",
             "Ünïcödé", "ab", "ba", "abab", "x" * 300, "😀", "tie", "eit"]
    docs = []
    for _ in range(n_docs):
        words = [rng.choice(vocab) for _ in range(rng.randint(150, 400))]
        docs.append(" ".join(words).encode())
    docs.append(b"abba baab " * 20)      # equal counts: ties between pairs
    return docs


def _reference(docs, vocab_size, pretok):
    return L._asm_merges(harness.train(docs, vocab_size, threads=1, pretokenizer=pretok))


@pytest.mark.parametrize("pretok", ["seed", "nanochat"])
@pytest.mark.parametrize("vocab_size", [280, 400, 700])
def test_every_python_rung_learns_the_merges_of_train(pretok, vocab_size):
    docs = _text()
    ref = _reference(docs, vocab_size, pretok)
    assert ref, "the text gives merges"
    for name, fn in L.RUNGS:
        if not callable(fn):
            continue
        got = L.run_python_rung(fn, docs, pretok, len(ref), budget_s=60)
        assert not got["extrapolated"], name
        assert got["merges"] == ref, (name, L._compare(ref, got["merges"]))


def test_the_text_has_ties_and_repeated_words():
    """The text the rungs are checked on makes ties matter: at many merges several
    pairs share the top count (the smaller pair must win), and words repeat."""
    docs = _text()
    words, weights = L._unique_words(docs, "nanochat")
    assert max(weights) > 50
    ties = 0
    for i, ((a, b), won) in enumerate(_reference(docs, 700, "nanochat")):
        counts = L._count_pairs(words, weights)
        assert counts[(a, b)] == won
        ties += sum(c == won for c in counts.values()) > 1
        words = [L._rewrite(w, a, b, L.N_BYTES + i) for w in words]
    assert ties >= 10, ties


def test_rungs_run_out_of_pairs_where_train_does():
    """A vocabulary larger than the text allows: train stops early, and every rung
    stops after the same merges (they are asked for more)."""
    docs = [b"aaaa abab abba " * 3]
    ref = _reference(docs, 400, "nanochat")
    assert 0 < len(ref) < 400 - 272
    for name, fn in L.RUNGS[:5]:
        got = L.run_python_rung(fn, docs, "nanochat", len(ref) + 50, budget_s=60)
        assert got["merges"] == ref, name


def test_lazy_heap_ties_go_to_the_smaller_pair():
    counts = {(5, 1): 3, (2, 9): 3, (2, 8): 1}
    heap = L._LazyHeap(counts)
    assert heap.best() == (2, 9)
    counts[(2, 9)] = 1                  # went down: re-pushed with the real count
    assert heap.best() == (5, 1)
    counts[(2, 8)] = 7                  # went up: pushed
    heap.rose((2, 8))
    assert heap.best() == (2, 8)
    assert L._best(counts) == (2, 8)


def test_compare_names_the_first_difference():
    ref = [((1, 2), 5), ((3, 4), 2)]
    assert L._compare(ref, ref) == ("yes", None)
    assert L._compare(ref, ref[:1], partial=True) == ("yes (first 1)", None)
    assert L._compare(ref, ref[:1]) == ("no@1", 1)           # ran out of pairs too soon
    assert L._compare(ref[:1], ref) == ("no@1", 1)
    assert L._compare(ref, [ref[0], ((3, 4), 3)]) == ("no@1", 1)


def test_a_rung_out_of_budget_is_extrapolated(tmp_path):
    """A tiny budget: the naive rung stops after one merge, its time is set-up plus its
    merge time x the merges asked, and the row says so."""
    docs = _text()
    ref = _reference(docs, 400, "nanochat")
    got = L.run_python_rung(L.naive, docs, "nanochat", len(ref), budget_s=1e-9)
    assert got["extrapolated"] and len(got["merges"]) == 1
    assert got["merges"] == ref[:1]
    assert got["seconds"] > got["setup_s"]

    path = tmp_path / "in.txt"
    path.write_bytes(b"\n".join(docs))
    lines = []
    rows = L.ladder(vocab_size=400, budget_s=1e-9, input_path=str(path), out=lines.append)
    text = "\n".join(lines)
    for r in rows[:5]:
        assert r["extrapolated"] and r["merges_done"] == 1, r
        assert r["merges_equal"] == "yes (first 1)"
    assert not any(r["extrapolated"] for r in rows[5:])
    assert rows[6]["merges_equal"] == "yes" and rows[5]["merges_equal"] == "(reference)"
    assert text.count("(extrapolated)") == 5        # the Python rungs' times


def test_cli_ladder_json_and_plot(tmp_path):
    path = tmp_path / "in.txt"
    path.write_bytes(b"\n".join(_text()))
    out_json = tmp_path / "rows.json"
    args = ["bench", "ladder", "--input", path, "--vocab-size", "330", "--budget-s", "30",
            "--json", out_json]
    have_plot = True
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        have_plot = False
    png = tmp_path / "ladder.png"
    if have_plot:
        args += ["--plot", png]
    r = invoke(*args)
    assert r.exit_code == 0, r.output
    assert "naive" in r.output and "dedup + heap" in r.output and "asmbpe, 1 thread" in r.output
    rows = json.loads(out_json.read_text())
    assert [row["rung"] for row in rows] == list(range(1, 8))
    assert set(rows[0]) == set(L.ROW_KEYS)
    assert all(row["merges_done"] == row["merges_target"] == 330 - 272 for row in rows)
    assert all(row["merges_equal"] in ("yes", "(reference)") for row in rows)
    assert rows[0]["speedup_naive"] == pytest.approx(1.0)
    if have_plot:
        assert png.read_bytes()[:8] == PNG
        assert f"plot: wrote {png}" in r.output


def test_cli_ladder_plot_without_matplotlib(tmp_path, monkeypatch):
    """No matplotlib: one line asking to install it, before any work, nothing written."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    path = tmp_path / "in.txt"
    path.write_bytes(b"\n".join(_text()))
    png = tmp_path / "ladder.png"
    r = invoke("bench", "ladder", "--input", path, "--plot", png)
    one_line_error(r, "pip install 'asmbpe[plot]'")
    assert not png.exists()


@pytest.mark.parametrize("args, needle", [
    (["--vocab-size", "272"], "--vocab-size must be between 273"),
    (["--budget-s", "0"], "--budget-s"),
])
def test_cli_ladder_bad_options(tmp_path, args, needle):
    path = tmp_path / "in.txt"
    path.write_bytes(b"hello world")
    r = invoke("bench", "ladder", "--input", path, *args)
    if r.exit_code == 2:                # click's own usage error for --budget-s 0
        assert needle in r.output
    else:
        one_line_error(r, needle)
