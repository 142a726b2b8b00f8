#!/usr/bin/env python3
"""Assemble asm/*.asm with nasm and link libasmbpe.so (and the test-only
libasmbpe_test.so from asm/test/*.asm) into harness/.

Incremental: an object is rebuilt only when its source, or any .inc it may
include, is newer than the object.  Prints what it does.  Exit status 1 with
nasm's file:line message on an assembly error.

    python build.py            # build what changed
    python build.py --clean    # remove objects and libraries first
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
ASM = ROOT / "asm"
OBJ = ROOT / "build" / "obj"
OUT = ROOT / "harness"
NASM_FLAGS = ["-f", "elf64", "-Werror", "-g", "-F", "dwarf", "-I", f"{ASM}/"]
# -Bsymbolic: calls between units bind inside the library (no PLT, no interposition)
LDFLAGS = ["-shared", "-nostdlib", "-Bsymbolic", "-z", "noexecstack", "-z", "now", "--hash-style=gnu"]

LIBS = {
    "libasmbpe.so": sorted(ASM.glob("*.asm")),
    # test-only code, plus its own copy of the thread layer it drives
    "libasmbpe_test.so": sorted((ASM / "test").glob("*.asm")) + [ASM / "threads.asm"],
}


class BuildError(Exception):
    pass


def find_nasm() -> str:
    nasm = shutil.which("nasm")
    if nasm:
        return nasm
    cmd = ["apt-get", "install", "-y", "nasm"]
    if os.geteuid() == 0 and shutil.which("apt-get"):
        print("nasm not found: installing it with apt-get", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=False)
        if subprocess.run(cmd).returncode == 0 and shutil.which("nasm"):
            return shutil.which("nasm")
    raise BuildError("nasm not found. Install it with:\n    sudo apt-get update && sudo apt-get install -y nasm")


def find_linker() -> list[str]:
    for ld in ("ld", "ld.bfd", "ld.gold"):
        path = shutil.which(ld)
        if path:
            return [path]
    raise BuildError("no linker (ld) found. Install it with:\n    sudo apt-get install -y binutils")


def stale(obj: Path, src: Path, incs: list[Path]) -> bool:
    if not obj.exists():
        return True
    t = obj.stat().st_mtime
    return src.stat().st_mtime > t or any(i.stat().st_mtime > t for i in incs)


def assemble(nasm: str, src: Path, obj: Path) -> None:
    obj.parent.mkdir(parents=True, exist_ok=True)
    rel = src.relative_to(ROOT) if src.is_relative_to(ROOT) else src
    print(f"  NASM  {rel}", flush=True)
    r = subprocess.run([nasm, *NASM_FLAGS, str(src), "-o", str(obj)],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        obj.unlink(missing_ok=True)
        msg = (r.stderr or r.stdout).strip()
        raise BuildError(f"assembly of {rel} failed:\n{msg}")


def build(clean: bool = False) -> int:
    if clean:
        shutil.rmtree(OBJ, ignore_errors=True)
        for lib in LIBS:
            (OUT / lib).unlink(missing_ok=True)
    nasm = find_nasm()
    ld = find_linker()
    incs = sorted(ASM.glob("*.inc"))
    did = 0
    for lib, sources in LIBS.items():
        objs = []
        for src in sources:
            obj = OBJ / src.relative_to(ASM).with_suffix(".o")
            if lib != "libasmbpe.so" and src.parent == ASM:
                obj = OBJ / "test" / ("shared_" + src.stem + ".o")
            if stale(obj, src, incs):
                assemble(nasm, src, obj)
                did += 1
            objs.append(obj)
        target = OUT / lib
        if not target.exists() or any(o.stat().st_mtime > target.stat().st_mtime for o in objs):
            print(f"  LD    {target.relative_to(ROOT)}", flush=True)
            tmp = target.with_name(target.name + ".tmp")
            r = subprocess.run([*ld, *LDFLAGS, "-soname", lib, "-o", str(tmp), *map(str, objs)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                tmp.unlink(missing_ok=True)
                raise BuildError(f"linking {lib} failed:\n{(r.stderr or r.stdout).strip()}")
            os.replace(tmp, target)
            did += 1
    print("build: up to date" if did == 0 else f"build: {did} step(s) done")
    return 0


def main(argv: list[str]) -> int:
    try:
        return build(clean="--clean" in argv)
    except BuildError as e:
        print(f"build.py: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
