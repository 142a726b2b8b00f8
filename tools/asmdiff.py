#!/usr/bin/env python3
"""Compare the machine code of two builds of libasmbpe.so routine by routine.

A development tool for refactors of the assembly (moving routines between files,
renaming layouts, struc instead of numbered offsets): it prints the routines whose
instructions differ, ignoring where the routines landed.

    python tools/asmdiff.py OLD.so NEW.so [--verbose] [--rename OLD=NEW ...]

--rename names a routine that was renamed (a label in the old build, its new name
in the new one); branch targets inside the routines are renamed the same way.
Branch targets are named by the routine that holds their address, so where two
files have local labels of one name, calls to the second are to `name#2` (and
`--rename name#2=NEW` renames them too).

Each routine is the code between two labels without a '.' (nasm's local labels,
`routine.loop`, stay inside their routine); a routine that starts where the one
before has its `.end` label (ENDFUNC / ENDPROC) is named by its own symbol (nm).
Instructions are compared with their addresses removed: branch targets as `<label+offset>`, RIP-relative operands by the
symbol objdump names, and alignment nops dropped.  A routine's start alignment
(its address mod 64) is reported separately, since a hot loop can move across a
cache line without its instructions changing.  Exit status 1 when any routine
differs or is missing on one side.
"""
from __future__ import annotations

import bisect
import re
import subprocess
import sys

HEADER = re.compile(r"^([0-9a-f]+) <([^>]+)>:$")
NOP = re.compile(r"^(data16 )*(cs )?(nop|xchg\s+ax,ax)\b")


def aliases(path: str) -> dict[str, str]:
    """`name.end` -> the routine that starts at the same address (from nm): objdump
    shows one label per address, and an ENDFUNC / ENDPROC `.end` label can hide the
    next routine's name (both its header and the branches to it)."""
    out = subprocess.run(["nm", "-n", path], check=True, capture_output=True, text=True).stdout
    at: dict[int, list[str]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tT":
            at.setdefault(int(parts[0], 16), []).append(parts[2])
    result = {}
    for names in at.values():
        plain = [n for n in names if "." not in n]
        if len(plain) == 1:
            for n in names:
                if n.endswith(".end"):
                    result[n] = plain[0]
    return result


def routines(path: str) -> dict[str, tuple[int, list[str]]]:
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-M", "intel", path],
                         check=True, capture_output=True, text=True).stdout
    alias = aliases(path)
    starts: list[tuple[int, str]] = []                  # (address, routine key)
    keys: set[str] = set()
    for line in out.splitlines():
        m = HEADER.match(line)
        name = alias.get(m.group(2), m.group(2)) if m else ""
        if m and "." not in name:
            key, n = name, 2
            while key in keys:                  # two files' local labels of one name
                key = f"{name}#{n}"
                n += 1
            keys.add(key)
            starts.append((int(m.group(1), 16), key))
    addrs = [a for a, _ in starts]

    def target(m: re.Match) -> str:
        """`addr <sym...>` -> `<key...>`: name a target by the key of the routine
        holding it, so routines of one name in two files stay apart (name#2)."""
        sym = m.group(2)
        end = re.match(r"[^+]*", sym).group(0)
        if end in alias:                        # a hidden routine name (see aliases)
            sym = alias[end] + sym[len(end):]
        i = bisect.bisect_right(addrs, int(m.group(1), 16)) - 1
        if i >= 0:
            key = starts[i][1]
            base = re.match(r"[^.+]*", sym).group(0)
            if key != base and key.split("#")[0] == base:
                sym = key + sym[len(base):]
        return f"<{sym}>"

    result: dict[str, tuple[int, list[str]]] = {}
    current = None
    nstart = 0
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            if "." not in alias.get(m.group(2), m.group(2)):
                current = starts[nstart][1]
                nstart += 1
                result[current] = (int(m.group(1), 16), [])
            continue
        if current is None or "\t" not in line:
            continue
        insn = line.split("\t", 1)[1].strip()
        if NOP.match(insn):
            continue
        insn = re.sub(r"\b([0-9a-f]+) <([^>]+)>", target, insn)     # branch targets
        insn = re.sub(r"\.\.@\d+\.", "..@N.", insn)                # macro-local labels
        insn = re.sub(r"\[rip\+0x[0-9a-f]+\]", "[rip+X]", insn)      # rip-relative
        insn = re.sub(r"#\s+[0-9a-f]+\s*(<[^>]+>)?", r"# \1", insn)
        result[current][1].append(re.sub(r"\s+", " ", insn))
    return result


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    old, new = routines(argv[0]), routines(argv[1])
    verbose = "--verbose" in argv
    renames = dict(a.split("=", 1) for a in argv if "=" in a)
    if renames:
        pat = re.compile(r"<(" + "|".join(map(re.escape, renames)) + r")([.+>])")
        old = {renames.get(k, k): (a0, [pat.sub(lambda m: "<" + renames[m.group(1)] + m.group(2), i)
                                        for i in a]) for k, (a0, a) in old.items()}
    bad = 0
    for name in sorted(set(old) | set(new)):
        if name not in new or name not in old:
            print(f"{name}: only in {'old' if name in old else 'new'}")
            bad += 1
            continue
        (a0, a), (b0, b) = old[name], new[name]
        if a != b:
            bad += 1
            print(f"{name}: differs ({len(a)} vs {len(b)} instructions)")
            if verbose:
                import difflib
                for d in difflib.unified_diff(a, b, lineterm="", n=1):
                    print("   ", d)
        elif a0 % 64 != b0 % 64:
            print(f"{name}: same code, start mod 64 {a0 % 64} -> {b0 % 64}")
    print(f"{len(old)} routines old, {len(new)} new, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
