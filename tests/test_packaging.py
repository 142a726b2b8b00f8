"""The package as a user installs it: `python -m build` from a clean copy of the
checkout gives an sdist with the assembly sources and, built from that sdist, a
platform wheel that carries libasmbpe.so and its header but not the test library;
installed into a fresh virtualenv and run from another directory, `asmbpe` trains,
encodes and decodes, and `import harness` loads the installed copy."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


def _run(cmd, **kw):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{cmd}\nstdout:\n{r.stdout[-3000:]}\nstderr:\n{r.stderr[-3000:]}"
    return r.stdout


def _clean_copy(dest: Path) -> Path:
    """The files a clean clone would have (tracked, plus new files git does not ignore)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs a git checkout (the files of a clean clone)")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, files):
        src = ROOT / os.fsdecode(name)
        if src.is_file():
            (dest / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / os.fsdecode(name))
    return dest


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # (run from out: in the checkout, its build/ folder would shadow PyPA's `build`)
    probe = subprocess.run([sys.executable, "-c", "import build.__main__"], cwd=out,
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("the `build` package (test extra) makes the sdist and wheel")
    src = _clean_copy(tmp_path_factory.mktemp("clone"))
    _run([sys.executable, "-m", "build", "--outdir", out, src], cwd=out)  # sdist, then its wheel
    sdists, wheels = list(out.glob("*.tar.gz")), list(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(out.iterdir())
    return sdists[0], wheels[0]


def test_sdist_carries_the_sources(dists):
    sdist, _ = dists
    with tarfile.open(sdist) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
    for need in ("build.py", "setup.py", "pyproject.toml", "LICENSE", "asm/asmbpe.h",
                 "asm/asmbpe.inc", "asm/memeq.asm", "asm/test/asmbpe_test.h",
                 "harness/__init__.py", "harness/_version.py"):
        assert need in names, need
    assert not any(n.endswith(".so") for n in names)


def test_wheel_is_a_platform_wheel_with_the_library(dists):
    _, wheel = dists
    assert wheel.name.endswith("-py3-none-linux_x86_64.whl"), wheel.name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        wheel_meta = z.read(next(n for n in names if n.endswith(".dist-info/WHEEL"))).decode()
    assert "Root-Is-Purelib: false" in wheel_meta
    for need in ("harness/libasmbpe.so", "harness/asmbpe.h", "harness/_ffi.py", "harness/py.typed",
                 "harness/_lib.py"):
        assert need in names, need
    assert not any("libasmbpe_test" in n or n.startswith("asm/") for n in names), sorted(names)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_installed_wheel_runs_from_elsewhere(dists, tmp_path):
    _, wheel = dists
    venv = tmp_path / "venv"
    # the dependencies (cffi, numpy, click, pyarrow...) come from this interpreter's
    # site-packages; the package itself only from the wheel
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    py, asmbpe = venv / "bin" / "python", venv / "bin" / "asmbpe"
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall", wheel])
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PYTHONNOUSERSITE"] = "1"
    run = dict(cwd=work, env=env)

    where = _run([py, "-c", "import harness; print(harness.__file__); print(harness.__version__)"],
                 **run).split()
    assert Path(where[0]).resolve().is_relative_to(venv.resolve()), where
    from harness._version import __version__
    assert where[1] == __version__
    assert _run([asmbpe, "--version"], **run).strip().endswith(__version__)

    text = (ROOT / "datasets" / "kjv.txt").read_bytes()[:200_000]
    (work / "in.txt").write_bytes(text)
    _run([asmbpe, "train", "in.txt", "-o", "t.bin", "--vocab-size", "1024"], **run)
    _run([asmbpe, "encode", "in.txt", "-t", "t.bin", "-o", "in.tok"], **run)
    r = subprocess.run([str(asmbpe), "decode", "in.tok", "-t", "t.bin"], capture_output=True, **run)
    assert r.returncode == 0, r.stderr
    assert r.stdout == b"<|bos|>" + text              # one document, after its <|bos|>

    # the u32 trainer (the train*.asm units assembled a second time by build.py) is in
    # the wheel's library: on u32 tokens throughout, it learns the command's merges
    out = _run([py, "-c", "import pathlib, numpy, harness; "
                "r = harness.train(pathlib.Path('in.txt').read_bytes(), 1024, _wide=True); "
                "t = harness.Tokenizer.load('t.bin'); "
                "print(r.n_merges, numpy.array_equal(r.merges, t.merges))"], **run)
    assert out.split() == ["752", "True"], out

    # a published vocabulary through the installed wheel (harness.vocab, rank, loaded
    # and the library's rank encoder): cl100k_base's ids for "Hello world"
    vocab = ROOT.parent / "shared" / "vocabs" / "cl100k_base.tiktoken.gz"
    if vocab.is_file():
        out = _run([asmbpe, "show", "-t", vocab, "Hello world"], **run)
        assert "9906" in out and "1917" in out, out

    # checkasm needs the test library, which only a source checkout builds: one line
    r = subprocess.run([str(asmbpe), "check"], capture_output=True, text=True, **run)
    assert r.returncode == 1 and r.stdout == "", (r.stdout, r.stderr)
    assert r.stderr.startswith("asmbpe: error: the test library is not built"), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
