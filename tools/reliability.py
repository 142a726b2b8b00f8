#!/usr/bin/env python3
"""The reliability figures of README.md ("Reliability"), produced by trying the faults:

    python tools/reliability.py [--quick] [--kills N] [--markdown]

1. corrupt tokenizer.bin: every byte of a trained tokenizer.bin (version 1) and of a
   saved cl100k_base (version 2, when ../shared/vocabs is there: its 64 header bytes and
   1,024 bytes spread evenly over its 1.4 MB; --quick: 128) changed three ways (xor
   0x01, 0x80, 0xff), and the file cut at lengths from 0 up; each must be refused (TokenizerFileError) or, for the few
   bytes that carry no meaning, load as the same tokenizer (a version-1 pre-tokenizer
   id changed to another valid id loads, and is counted in the row's note: version 1's
   hash covers the merges only, SPEC §7; version 2's covers everything);
2. corrupt .tok: every u64 count of the header (tokens, documents, source bytes) of a
   version-1 and a version-2 file set to 0, -1, +1, -1 and x2, and every 64th token
   changed to another in-range id; a count edit must be refused when the file is read
   (or by `TokFile.verify`), a token edit by `verify` (version 2's CRC; version 1 only
   when the edit changes the bytes or the documents the tokens spell);
3. killed runs: `asmbpe encode` of 48 MB killed with SIGKILL, SIGTERM and SIGHUP at
   random moments, N times each; afterwards no file but the inputs may be in the
   directory (and the output, complete, when the run had finished);
4. determinism: the same input encoded with 1, 2, 3 and 8 threads gives byte-identical
   .tok files, and 4 Python threads sharing one Tokenizer give the ids of one.

(The out-of-memory sweep is tests/test_memory.py's and README's "Out of memory".)
Prints one line per row; exit status 1 when any fault was not handled.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.tokenizer import Tokenizer, TokenizerFileError  # noqa: E402
from harness.tokfile import (HEADER_SIZE, OFF_BYTES, OFF_DOCUMENTS, OFF_TOKENS,  # noqa: E402
                             TokFileError, TokWriter, read_tok)

TEXT = ("The quick brown fox jumps over the lazy dog. Ünïcödé, 数字 123, code() { x; }\n"
        * 64).encode()
CL100K = ROOT.parent / "shared" / "vocabs" / "cl100k_base.tiktoken.gz"


def _trained() -> Tokenizer:
    import harness

    return harness.train([TEXT * 8, bytes(range(256)) * 4], 600, threads=1).tokenizer


def _variants(data: bytes, positions) -> "iterator[bytes]":
    for pos in positions:
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(data)
            bad[pos] ^= flip
            yield bytes(bad)


def corrupt_tokenizers(quick: bool) -> list[tuple[str, int, int]]:
    """(what, files tried, files handled) for tokenizer.bin."""
    rows = []
    own = _trained()
    images = [(f"tokenizer.bin v1 (vocab {own.vocab_size})", own.to_bytes())]
    if CL100K.is_file():
        images.append(("tokenizer.bin v2 (cl100k_base)",
                       Tokenizer.from_tiktoken(CL100K).to_bytes()))
    for what, good in images:
        ref = Tokenizer.from_bytes(good)
        n = len(good)
        if n <= 8192:
            positions = range(n)
        else:                           # every header byte, then bytes spread evenly
            spread = 128 if quick else 1024
            positions = sorted(set(range(64)) | set(range(64, n, (n - 64) // spread)))
        tried = handled = other_pretok = 0
        for bad in _variants(good, positions):
            tried += 1
            try:
                got = Tokenizer.from_bytes(bad)
            except TokenizerFileError:
                handled += 1
                continue
            if got == ref:                                      # a byte that carries nothing
                handled += 1
            elif (got.pretokenizer != ref.pretokenizer and got.merges_hash == ref.merges_hash
                  and ref.to_bytes()[:8] == b"ASMBPETK" and bad[8:10] == b"\x01\x00"):
                other_pretok += 1       # version 1's hash covers the merges only (SPEC §7)
        note = (f"{other_pretok} loaded: the pre-tokenizer id changed to another valid one, "
                "which version 1's hash does not cover (SPEC §7)" if other_pretok else "")
        rows.append((f"{what}: bytes changed", tried, handled + other_pretok, note))
        cuts = range(0, n, max(1, n // (256 if quick else 4096)))
        tried = handled = 0
        for k in cuts:
            tried += 1
            try:
                Tokenizer.from_bytes(good[:k])
            except TokenizerFileError:
                handled += 1
        rows.append((f"{what}: truncated", tried, handled))
    return rows


def _tok_file(path: Path, tok: Tokenizer, version: int) -> None:
    docs = [TEXT[i:i + 300] for i in range(0, len(TEXT), 300)]
    flat, counts = tok.encode_many(docs, bos=(version == 1))
    with TokWriter(path, tok.merges_hash, version=version, width=2) as w:
        w.write(flat, len(docs), sum(map(len, docs)), counts=counts if version == 2 else None)


def _refused(path: Path, tok: Tokenizer) -> bool:
    try:
        read_tok(path, tok).verify(tok)
    except TokFileError:
        return True
    return False


def corrupt_tok_files(quick: bool) -> list[tuple[str, int, int]]:
    tok = _trained()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for version in (1, 2):
            good = Path(d) / f"good{version}.tok"
            _tok_file(good, tok, version)
            data = good.read_bytes()
            tried = handled = 0
            for off in (OFF_TOKENS, OFF_DOCUMENTS, OFF_BYTES):
                value = int.from_bytes(data[off:off + 8], "little")
                for new in {0, value - 1, value + 1, value * 2, 2 ** 64 - 1} - {value}:
                    bad = bytearray(data)
                    bad[off:off + 8] = (new % 2 ** 64).to_bytes(8, "little")
                    p = Path(d) / "bad.tok"
                    p.write_bytes(bytes(bad))
                    tried += 1
                    handled += _refused(p, tok)
            rows.append((f".tok v{version}: header counts edited", tried, handled))
            n_tokens = int.from_bytes(data[OFF_TOKENS:OFF_TOKENS + 8], "little")
            step = 256 if quick else 64
            tried = handled = same_length = 0
            table = tok.id_to_bytes()
            rng = random.Random(version)
            for k in range(0, n_tokens, step):
                off = HEADER_SIZE + 2 * k
                old = int.from_bytes(data[off:off + 2], "little")
                new = rng.choice([i for i in range(256, tok.vocab_size - 16) if i != old][:64])
                bad = bytearray(data)
                bad[off:off + 2] = new.to_bytes(2, "little")
                p = Path(d) / "bad.tok"
                p.write_bytes(bytes(bad))
                tried += 1
                if _refused(p, tok):
                    handled += 1
                elif version == 1 and len(table[new]) == len(table[old]):
                    same_length += 1            # version 1 has no checksum
            note = (f"{same_length} not refused: the same number of bytes, and version 1 "
                    "has no checksum" if same_length else "")
            rows.append((f".tok v{version}: a token changed (verify)", tried,
                         handled + same_length, note))
    return rows


def killed_runs(n: int) -> list[tuple[str, int, int]]:
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        big = d / "big.txt"
        with open(big, "wb") as f:
            for _ in range(48 * (1 << 20) // len(TEXT) + 1):
                f.write(TEXT)
        tok = d / "tok.bin"
        _trained().save(tok)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        ref = d / "ref.tok"
        subprocess.run([sys.executable, "-m", "harness.cli", "encode", str(big), "-t",
                        str(tok), "-o", str(ref), "-q"], env=env, check=True,
                       capture_output=True)
        expect = read_tok(ref).n_tokens
        ref.unlink()
        for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP):
            tried = handled = done = 0
            for _ in range(n):
                out = d / "out" / "x.tok"
                out.parent.mkdir(exist_ok=True)
                p = subprocess.Popen([sys.executable, "-m", "harness.cli", "encode", str(big),
                                      "-t", str(tok), "-o", str(out), "-q"], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(random.uniform(0.1, 1.2))
                p.send_signal(sig)
                p.wait()
                left = sorted(x.name for x in out.parent.iterdir())
                finished = p.returncode == 0
                done += finished
                # killed or not, the output is absent or complete, and nothing else is there
                # (a kill after the rename, before the exit, leaves the complete file)
                ok = left in ([], ["x.tok"]) and (finished <= (left == ["x.tok"]))
                if left == ["x.tok"]:
                    ok = ok and read_tok(out).n_tokens == expect
                if not ok:
                    print(f"{sig.name}: left {left} (exit status {p.returncode})",
                          file=sys.stderr)
                tried += 1
                handled += ok
                for x in out.parent.iterdir():
                    x.unlink()
            rows.append((f"encode killed by {sig.name}: nothing partial left", tried, handled,
                         f"{tried - done} killed while running, {done} had finished"))
    return rows


def determinism() -> list[tuple[str, int, int]]:
    tok = _trained()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        d = Path(d)
        src = d / "in.txt"
        src.write_bytes(TEXT * 64)
        tok_path = d / "tok.bin"
        tok.save(tok_path)
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        outs = []
        for threads in (1, 2, 3, 8):
            out = d / f"t{threads}.tok"
            subprocess.run([sys.executable, "-m", "harness.cli", "encode", str(src), "-t",
                            str(tok_path), "-o", str(out), "--threads", str(threads), "-q",
                            "--separator", ""], env=env, check=True, capture_output=True)
            outs.append(out.read_bytes())
        rows.append(("encode with 1/2/3/8 threads: identical .tok files", 4,
                     sum(o == outs[0] for o in outs)))
        docs = [TEXT[i:i + 997] for i in range(0, len(TEXT), 997)] * 8
        want = [tok.encode(x).tolist() for x in docs]
        with ThreadPoolExecutor(4) as ex:
            got = list(ex.map(lambda x: tok.encode(x).tolist(), docs))
        rows.append(("4 Python threads sharing a Tokenizer: ids of one", len(docs),
                     sum(a == b for a, b in zip(got, want))))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer variants (for the tests)")
    ap.add_argument("--kills", type=int, default=5, help="kills per signal (default 5)")
    ap.add_argument("--markdown", action="store_true", help="a Markdown table")
    a = ap.parse_args(argv)
    rows = (corrupt_tokenizers(a.quick) + corrupt_tok_files(a.quick)
            + (killed_runs(a.kills) if a.kills else []) + determinism())
    if a.markdown:
        print("| fault | tried | handled | note |\n|---|---:|---:|---|")
    for what, tried, handled, *note in rows:
        note = note[0] if note else ""
        print(f"| {what} | {tried:,} | {handled:,} | {note} |" if a.markdown
              else f"{what:<56} {tried:>8,} tried {handled:>8,} handled  {note}")
    return 0 if all(r[1] == r[2] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
