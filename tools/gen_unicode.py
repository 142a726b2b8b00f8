"""Generate harness/dev/unicode_classes.py: the Unicode class of every code point, for
the exact pre-tokenizers (SPEC section 10).  See docs/UNICODE.md.

A development tool, run by hand; nothing in the build, the package or the library runs
it.  The table it writes is committed, and tests/test_unicode_classes.py checks that
this script still reproduces it (`--check`: the same text and, decoded, the same tables).

The Unicode version is the one tiktoken's regex engine (the Rust regex crate under
fancy-regex) uses, found by probing tiktoken (docs/UNICODE.md): Unicode 16.0.0.  The
data is the Unicode Character Database of exactly that version:

- the General_Category of every code point from `unicodedata2` 16.0.0 (PyPI; a copy of
  CPython's unicodedata built on the UCD of its version number; its `unidata_version`
  must be 16.0.0):  pip install unicodedata2==16.0.0
- the White_Space property from PropList.txt, written out below (unchanged since
  Unicode 6.3, which took U+180E out; checked against the `regex` module's
  \\p{White_Space} when it is installed).

The class of a code point is a byte of bits (the bit constants below).  Unassigned code
points (Cn), surrogates (Cs), private use (Co), controls (Cc, except the White_Space
ones), formats (Cf), symbols, punctuation and separators other than White_Space: 0.

Usage (from the repository root):

    python3 tools/gen_unicode.py                   write harness/dev/unicode_classes.py
    python3 tools/gen_unicode.py --check           exit 1 if the committed file differs
    python3 tools/gen_unicode.py --verify-tiktoken probe tiktoken on every code point
                                                   and every class bit (about a minute)
    python3 tools/gen_unicode.py --diff-regex      the code points whose class differs in
                                                   the `regex` module, as ranges (the
                                                   list in docs/UNICODE.md)
"""

from __future__ import annotations

import argparse
import base64
import re
import sys
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "harness" / "dev" / "unicode_classes.py"
OUT_ASM = ROOT / "asm" / "unicode_tab.asm"     # the same classes for the library

UNICODE_VERSION = "16.0.0"

LU_LT = 1
LL = 2
LM_LO = 4
M = 8
N = 16
WS = 32

BIT_NAMES = {LU_LT: "LU_LT", LL: "LL", LM_LO: "LM_LO", M: "M", N: "N", WS: "WS"}

CATEGORY_BITS = {
    "Lu": LU_LT, "Lt": LU_LT, "Ll": LL, "Lm": LM_LO, "Lo": LM_LO,
    "Mn": M, "Mc": M, "Me": M, "Nd": N, "Nl": N, "No": N,
}

# PropList.txt, White_Space (the same list in Unicode 6.3 through 17.0)
WHITE_SPACE_RANGES = (
    (0x0009, 0x000D), (0x0020, 0x0020), (0x0085, 0x0085), (0x00A0, 0x00A0),
    (0x1680, 0x1680), (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
    (0x205F, 0x205F), (0x3000, 0x3000),
)

# Each class bit as a regex character class's items: the same syntax in the Rust regex
# crate (tiktoken) and in the Python `regex` module.
BIT_CLASS_ITEMS = {
    LU_LT: r"\p{Lu}\p{Lt}",
    LL: r"\p{Ll}",
    LM_LO: r"\p{Lm}\p{Lo}",
    M: r"\p{M}",
    N: r"\p{N}",
    WS: r"\s",
}

# For the probes: a code point in the class (the context) and one in none of them.
BIT_CONTEXT = {LU_LT: "A", LL: "a", LM_LO: "\u05d0", M: "\u0300", N: "1", WS: " "}
PROBE_SEPARATOR = "!"

SURROGATES = range(0xD800, 0xE000)
MAX_CP = 0x10FFFF


# ---------------------------------------------------------------------------------------
# The table


def build_table() -> bytes:
    """One class byte per code point 0..0x10FFFF, from the UCD of UNICODE_VERSION."""
    try:
        import unicodedata2
    except ImportError:
        sys.exit(f"gen_unicode: needs unicodedata2: pip install unicodedata2=={UNICODE_VERSION}")
    if unicodedata2.unidata_version != UNICODE_VERSION:
        sys.exit(
            f"gen_unicode: unicodedata2 carries Unicode {unicodedata2.unidata_version}, "
            f"the table is Unicode {UNICODE_VERSION}: pip install unicodedata2=={UNICODE_VERSION}"
        )
    category = unicodedata2.category
    table = bytearray(CATEGORY_BITS.get(category(chr(cp)), 0) for cp in range(MAX_CP + 1))
    for lo, hi in WHITE_SPACE_RANGES:
        for cp in range(lo, hi + 1):
            table[cp] |= WS
    for cp in SURROGATES:
        table[cp] = 0
    return bytes(table)


def two_stage(table: bytes) -> tuple[bytes, bytes]:
    """STAGE1: a block number per 256 code points; STAGE2: the unique blocks."""
    blocks: dict[bytes, int] = {}
    stage1 = bytearray()
    for b in range(len(table) // 256):
        block = table[b * 256 : (b + 1) * 256]
        stage1.append(blocks.setdefault(block, len(blocks)))
    if len(blocks) > 256:
        raise SystemExit(f"gen_unicode: {len(blocks)} unique blocks do not fit a byte")
    return bytes(stage1), b"".join(blocks)


def _literal(data: bytes) -> str:
    text = base64.b64encode(zlib.compress(data, 9)).decode("ascii")
    lines = [text[i : i + 76] for i in range(0, len(text), 76)]
    return "\n".join(f'    b"{line}"' for line in lines)


def render(table: bytes) -> str:
    stage1, stage2 = two_stage(table)
    bits = "\n".join(f"{name} = {bit}" for bit, name in BIT_NAMES.items())
    return f'''\
# Generated by tools/gen_unicode.py; do not edit (change the generator and rerun it).
# Unicode {UNICODE_VERSION}, the version of tiktoken's regex engine (docs/UNICODE.md).
# Source: the Unicode Character Database {UNICODE_VERSION}: General_Category from
# unicodedata2 {UNICODE_VERSION} (PyPI), White_Space from PropList.txt.
r"""The Unicode class of every code point, for the exact pre-tokenizers (SPEC section 10).

classes(cp) is a byte of bits: LU_LT (Lu or Lt), LL, LM_LO (Lm or Lo), M (Mn Mc Me),
N (Nd Nl No), WS (the White_Space property, the patterns' \\s).  So \\p{{L}} is
LU_LT|LL|LM_LO, o200k's [\\p{{Lu}}\\p{{Lt}}\\p{{Lm}}\\p{{Lo}}\\p{{M}}] is LU_LT|LM_LO|M and
[\\p{{Ll}}\\p{{Lm}}\\p{{Lo}}\\p{{M}}] is LL|LM_LO|M.  Unassigned code points, surrogates and
anything outside 0..0x10FFFF: 0.

Two stages: STAGE1[cp >> 8] is a block number, STAGE2[block * 256 + (cp & 0xFF)] the
class ({len(stage1)} blocks of 256 code points, {len(stage2) // 256} unique).
"""

import base64 as _base64
import zlib as _zlib

UNICODE_VERSION = "{UNICODE_VERSION}"

{bits}

STAGE1: bytes = _zlib.decompress(_base64.b64decode(
{_literal(stage1)}
))

STAGE2: bytes = _zlib.decompress(_base64.b64decode(
{_literal(stage2)}
))


def classes(cp: int) -> int:
    """The class bits of code point cp (0 outside 0..0x10FFFF)."""
    if not 0 <= cp <= 0x10FFFF:
        return 0
    return STAGE2[(STAGE1[cp >> 8] << 8) | (cp & 0xFF)]
'''


# ---------------------------------------------------------------------------------------
# Probes of tiktoken and of the `regex` module


def tiktoken_chunks(pattern: str, text: str) -> list[bytes]:
    """The chunks tiktoken's engine cuts `text` into under `pattern`.

    tiktoken has no split API, but it looks each whole chunk up in the ranks first: with
    ranks holding every single byte and every substring of `text` (bytes first, then the
    substrings by length), each chunk is exactly one token."""
    import tiktoken

    data = text.encode("utf-8")
    ranks = {bytes([b]): b for b in range(256)}
    subs = {data[i:j] for i in range(len(data)) for j in range(i + 2, len(data) + 1)}
    for s in sorted(subs, key=lambda s: (len(s), s)):
        ranks[s] = len(ranks)
    enc = tiktoken.Encoding(name="probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return [enc.decode_single_token_bytes(t) for t in enc.encode(text, disallowed_special="all")]


def tiktoken_members(bit: int, cps: list[int]) -> set[int]:
    """The code points of `cps` (no surrogates) that tiktoken's engine puts in the class
    of `bit`, probed in bulk: under the pattern C+|[^C]+ the line c X c ! (c in C, ! in
    none of the classes) is the chunk cXc iff X is in C.  Only the single bytes and the
    cXc strings are ranks, so the token of cXc appears iff that chunk was cut."""
    import tiktoken

    items = BIT_CLASS_ITEMS[bit]
    c = BIT_CONTEXT[bit]
    pattern = f"[{items}]+|[^{items}]+"
    ranks = {bytes([b]): b for b in range(256)}
    for cp in cps:
        ranks[(c + chr(cp) + c).encode("utf-8")] = len(ranks)
    text = "".join(c + chr(cp) + c + PROBE_SEPARATOR for cp in cps)
    enc = tiktoken.Encoding(name="probe", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    return {cps[t - 256] for t in enc.encode_ordinary(text) if t >= 256}


def _all_code_points_text() -> str:
    return "".join(chr(cp) for cp in range(MAX_CP + 1) if cp not in SURROGATES)


def _index_to_cp(i: int) -> int:
    return i if i < SURROGATES.start else i + len(SURROGATES)


def regex_table() -> bytes:
    """The class byte of every code point as the Python `regex` module sees it."""
    import regex

    text = _all_code_points_text()
    table = bytearray(MAX_CP + 1)
    for bit, items in BIT_CLASS_ITEMS.items():
        for m in regex.finditer(f"[{items}]", text):
            table[_index_to_cp(m.start())] |= bit
    return bytes(table)


def bit_names(bits: int) -> str:
    return "|".join(name for bit, name in BIT_NAMES.items() if bits & bit) or "0"


def diff_ranges(a: bytes, b: bytes) -> list[tuple[int, int, int, int]]:
    """Runs of consecutive code points where a and b differ, with the same pair of
    values: (first, last, a value, b value)."""
    runs: list[tuple[int, int, int, int]] = []
    for cp in range(len(a)):
        if a[cp] != b[cp]:
            if runs and runs[-1][1] == cp - 1 and runs[-1][2:] == (a[cp], b[cp]):
                runs[-1] = (runs[-1][0], cp, a[cp], b[cp])
            else:
                runs.append((cp, cp, a[cp], b[cp]))
    return runs


def format_diff_line(first: int, last: int, ours: int, theirs: int) -> str:
    span = f"U+{first:04X}" if first == last else f"U+{first:04X}..U+{last:04X}"
    return f"{span:<20} {last - first + 1:>5}  tiktoken={bit_names(ours):<14} regex={bit_names(theirs)}"


# ---------------------------------------------------------------------------------------


def _without_payloads(text: str) -> str:
    """The file's text with its compressed tables (the b"..." literals) left out."""
    return re.sub(r'(b"[A-Za-z0-9+/=]*"\s*)+', "PAYLOAD ", text)


def committed_table() -> bytes:
    """The table of the committed file, read without importing the package."""
    namespace: dict = {}
    exec(compile(OUT.read_text(), str(OUT), "exec"), namespace)
    s1, s2 = namespace["STAGE1"], namespace["STAGE2"]
    return bytes(s2[(s1[cp >> 8] << 8) | (cp & 0xFF)] for cp in range(MAX_CP + 1))


# The library's tables (asm/unicode_tab.asm), laid out as asm/unicode.inc names them:
# NL marks CR and LF in the ASCII table (the patterns' [\r\n]); the lead tables give,
# for lead bytes 0xE0-0xFF, the lowest allowed second byte and the span above it
# (Unicode Table 3-7: no overlong, no surrogate, nothing above U+10FFFF).
NL = 64
ASM_LAYOUT = (("U_ASCII", 128), ("U_DIRECT2", 2048), ("U_LO2", 32), ("U_SPAN2", 32),
              ("U_STAGE1", (MAX_CP + 1) >> 8), ("U_L2C", 32), ("U_L2D", 32),
              ("U_O2TC", 32), ("U_O2TD", 32), ("U_O2EC", 32), ("U_O2ED", 32))
LETTER = LU_LT | LL | LM_LO
# The ASCII windows' 2-byte letters (asm/pretok.inc): lead bytes whose 64 code points
# are all letters, by low nibble (vpshufb tables, both 128-bit lanes), for leads
# 0xC0-0xCF and 0xD0-0xDF; 0xC3 is all letters but U+00D7 and U+00F7 (the window
# checks those two itself).
C3_NOT_LETTERS = (0xD7, 0xF7)


def _two_byte_letter_leads(table: bytes) -> tuple[bytes, bytes]:
    flags = bytearray(32)
    for lead in range(0xC2, 0xE0):
        base = (lead & 0x1F) << 6
        if all(table[cp] & LETTER for cp in range(base, base + 64)):
            flags[lead - 0xC0] = 0xFF
    not_letters = tuple(cp for cp in range(0xC0, 0x100) if not table[cp] & LETTER)
    if not_letters != C3_NOT_LETTERS:
        raise SystemExit(f"gen_unicode: U+00C0-U+00FF not letters: {not_letters}; "
                         "asm/pretok.inc's 0xC3 rule expects U+00D7 and U+00F7")
    # asm/pretok.inc's WIN_P3 takes E2 80 xx for xx in 8B-A7, AA-AE, B0-BF as O
    # characters (in no class) and leaves the others (white space) to the scanners
    p3 = [0x2000 + (xx - 0x80) for xx in range(0x80, 0xC0)
          if 0x8B <= xx <= 0xA7 or 0xAA <= xx <= 0xAE or xx >= 0xB0]
    if any(table[cp] for cp in p3) or any(
            table[cp] != WS for cp in range(0x2000, 0x2040) if cp not in p3):
        raise SystemExit("gen_unicode: U+2000-U+203F changed; asm/pretok.inc's P3_TAIL "
                         "expects the ones it takes in no class and the rest white space")
    lane_c, lane_d = bytes(flags[:16]), bytes(flags[16:])
    return lane_c * 2, lane_d * 2


def _two_byte_cased_leads(table: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """o200k's window (asm/pretok_window.inc, O2_CASE): per lead byte 0xC0-0xDF, the
    second bytes 0x80 + [0, end) whose code points are all Lu/Lt (below 0x80 + thr)
    then all Ll (from it): one cased word may run through them, split where an upper
    case letter follows a lower case one.  Leads with end 0 are left to the scanner.
    0xC3's U+00D7 and U+00F7 (not letters) are skipped here: the window checks them.
    vpshufb tables (both lanes): thr for 0xC_, 0xD_, end for 0xC_, 0xD_; the 0xC_ ones
    by lead - 0xC0, the 0xD_ ones by lead - 0xCF (entry 0 for the bytes below: 0;
    0xDF, left out, must be unhandled)."""
    thr, end = bytearray(32), bytearray(32)
    for lead in range(0xC2, 0xE0):
        base = (lead & 0x1F) << 6
        t, lower = None, False
        e = 64
        for c in range(64):
            if lead == 0xC3 and base + c in C3_NOT_LETTERS:
                continue
            cls = table[base + c]
            if cls == LU_LT and not lower:
                continue
            if cls == LL:
                if not lower:
                    lower, t = True, c
                continue
            e = c
            break
        thr[lead - 0xC0], end[lead - 0xC0] = (e if t is None else t), e
    if end[0x1F]:
        raise SystemExit("gen_unicode: lead 0xDF has cased letters; O2_CASE's tables leave it out")
    lanes = [bytes([0]) + bytes(x[16:31]) for x in (thr, end)]
    lanes = [lane * 2 for lane in lanes]
    return bytes(thr[:16]) * 2, lanes[0], bytes(end[:16]) * 2, lanes[1]


def _second_byte_ranges() -> tuple[bytes, bytes]:
    lo, span = bytearray(32), bytearray(32)
    for i in range(32):
        lead = 0xE0 + i
        a, b = {0xE0: (0xA0, 0xBF), 0xED: (0x80, 0x9F), 0xF0: (0x90, 0xBF),
                0xF4: (0x80, 0x8F)}.get(lead, (0x80, 0xBF))
        if lead > 0xF4:
            a, b = 0x80, 0x7F           # never: these leads are refused before the lookup
        lo[i], span[i] = a, (b - a) & 0xFF
    return bytes(lo), bytes(span)


def render_asm(table: bytes) -> str:
    stage1, stage2 = two_stage(table)
    ascii_ = bytearray(table[:128])
    ascii_[0x0A] |= NL
    ascii_[0x0D] |= NL
    lo, span = _second_byte_ranges()
    l2c, l2d = _two_byte_letter_leads(table)
    o2 = _two_byte_cased_leads(table)
    parts = dict(zip((name for name, _ in ASM_LAYOUT),
                     (bytes(ascii_), table[:0x800], lo, span, stage1, l2c, l2d, *o2)))
    out = [
        "; Generated by tools/gen_unicode.py; do not edit (change the generator and rerun it).",
        f"; Unicode {UNICODE_VERSION}, the version of tiktoken's regex engine (docs/UNICODE.md):",
        "; the class byte of every code point (bits in asm/unicode.inc, the same as",
        "; harness/dev/unicode_classes.py), as the exact pre-tokenizers look it up.",
        "%define UNICODE_TAB_HERE",
        '%include "unicode.inc"',
        "",
        "section .rodata align=64",
        "global asmbpe_uni:data hidden",
        "asmbpe_uni:",
    ]
    for name, size in ASM_LAYOUT:
        data = parts[name]
        assert len(data) == size, name
        out.append(f"%if $ - asmbpe_uni != {name}")
        out.append(f'    %error "asmbpe_uni: {name} is not where unicode.inc says"')
        out.append("%endif")
        out.append(f"; {name} ({size} bytes)")
        out += ["    db " + ",".join(str(b) for b in data[i:i + 32]) for i in range(0, size, 32)]
    out.append("%if $ - asmbpe_uni != U_STAGE2")
    out.append('    %error "asmbpe_uni: U_STAGE2 is not where unicode.inc says"')
    out.append("%endif")
    out.append(f"; U_STAGE2 ({len(stage2)} bytes: {len(stage2) // 256} blocks of 256 code points)")
    out += ["    db " + ",".join(str(b) for b in stage2[i:i + 32]) for i in range(0, len(stage2), 32)]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    group.add_argument("--verify-tiktoken", action="store_true", help="probe tiktoken on every code point")
    group.add_argument("--diff-regex", action="store_true", help="list the differences to the regex module")
    args = ap.parse_args(argv)

    if args.check:
        # the same text around the tables and the same tables once decoded: the zlib
        # stream itself may differ between zlib builds (zlib-ng, say)
        table = build_table()
        same = (OUT.exists() and _without_payloads(OUT.read_text()) == _without_payloads(render(table))
                and committed_table() == table)
        if not same:
            print(f"{OUT.relative_to(ROOT)} differs from what tools/gen_unicode.py generates")
            return 1
        if not OUT_ASM.exists() or OUT_ASM.read_text() != render_asm(table):
            print(f"{OUT_ASM.relative_to(ROOT)} differs from what tools/gen_unicode.py generates")
            return 1
        print(f"{OUT.relative_to(ROOT)} and {OUT_ASM.relative_to(ROOT)} are up to date "
              f"(Unicode {UNICODE_VERSION})")
        return 0

    if args.verify_tiktoken:
        table = committed_table()
        cps = [cp for cp in range(MAX_CP + 1) if cp not in SURROGATES]
        bad = 0
        for bit, name in BIT_NAMES.items():
            members: set[int] = set()
            for i in range(0, len(cps), 1 << 17):
                members |= tiktoken_members(bit, cps[i : i + (1 << 17)])
            wrong = [cp for cp in cps if bool(table[cp] & bit) != (cp in members)]
            print(f"{name:<6} tiktoken members {len(members):>7}, differ from the table: {len(wrong)}"
                  + (" " + " ".join(f"U+{cp:04X}" for cp in wrong[:20]) if wrong else ""))
            bad += len(wrong)
        return 1 if bad else 0

    if args.diff_regex:
        import regex

        runs = diff_ranges(committed_table(), regex_table())
        print(f"# regex {regex.__version__}: {sum(r[1] - r[0] + 1 for r in runs)} code points, {len(runs)} runs")
        for run in runs:
            print(format_diff_line(*run))
        return 0

    table = build_table()
    OUT.write_text(render(table))
    print(f"wrote {OUT.relative_to(ROOT)} (Unicode {UNICODE_VERSION}, {OUT.stat().st_size} bytes)")
    OUT_ASM.write_text(render_asm(table))
    print(f"wrote {OUT_ASM.relative_to(ROOT)} ({OUT_ASM.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
