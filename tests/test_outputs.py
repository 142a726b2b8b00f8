"""Outputs (issue 23): `-o` may not replace an input or the tokenizer; a run killed by
SIGKILL, SIGTERM or SIGHUP leaves no hidden temporary (O_TMPFILE: nothing named exists
until the output is complete; the named fallback is removed on TERM/HUP and swept by
the next run when its process is gone); a rerun into a shard directory leaves exactly
its own shards; every output follows the umask (harness.files)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli_util import invoke, kjv_tokenizer, open_files
from cli_util import one_line_error as _one_line_error

from harness import files as F
from harness.tokenizer import Tokenizer
from harness.tokfile import read_tok

ROOT = Path(__file__).resolve().parents[1]
KJV = ROOT / "datasets" / "kjv.txt"
BIG_MB = 128                # the input the kill tests encode (0.8-1 s on one thread: the
                            # signal must come well before the encode ends)


def one_line_error(result, needle: str) -> None:
    _one_line_error(result, needle, progress_ok=True)


def tmpfile_works(directory) -> bool:
    """Whether O_TMPFILE files can be made (and named through /proc) in directory."""
    fd = F._open_unnamed(os.fspath(directory))
    if fd is None:
        return False
    os.close(fd)
    return True


@pytest.fixture(scope="module")
def tok_path(tmp_path_factory) -> Path:
    """A small tokenizer (vocab 400) trained on the start of the KJV."""
    return kjv_tokenizer(tmp_path_factory.mktemp("tok"), 40_000, 400)


@pytest.fixture(scope="module")
def big_text(tmp_path_factory) -> Path:
    """About BIG_MB MB of the KJV, repeated (one document)."""
    p = tmp_path_factory.mktemp("big") / "big.txt"
    kjv = KJV.read_bytes()
    with open(p, "wb") as f:
        for _ in range(BIG_MB * 1_000_000 // len(kjv) + 1):
            f.write(kjv)
    return p


@pytest.fixture
def small_text(tmp_path) -> Path:
    p = tmp_path / "in.txt"
    p.write_bytes(KJV.read_bytes()[:20_000])
    return p


def hidden(directory: Path) -> list[str]:
    """Everything in directory whose name starts with a dot (temporaries, staging)."""
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


# ------------------------------------------------------------------- -o is an input

def test_encode_refuses_output_equal_to_an_input_or_the_tokenizer(tmp_path, tok_path,
                                                                  small_text):
    before = small_text.read_bytes()
    tok_before = tok_path.read_bytes()
    one_line_error(invoke("encode", small_text, "-t", tok_path, "-o", small_text, "-q"),
                   "is also an input")
    one_line_error(invoke("encode", small_text, "-t", tok_path, "-o", tok_path, "-q"),
                   "is also an input")
    # the same file by another name: a symbolic link, a hard link, a path with ..
    sym = tmp_path / "sym.txt"
    sym.symlink_to(small_text)
    hard = tmp_path / "hard.txt"
    os.link(small_text, hard)
    dotted = tmp_path / "sub" / ".." / small_text.name
    (tmp_path / "sub").mkdir()
    for out in (sym, hard, dotted):
        one_line_error(invoke("encode", small_text, "-t", tok_path, "-o", out, "-q"),
                       "is also an input")
    assert small_text.read_bytes() == before
    assert tok_path.read_bytes() == tok_before
    assert sym.is_symlink()


def test_train_and_export_refuse_output_equal_to_an_input(tmp_path, tok_path, small_text):
    before = small_text.read_bytes()
    one_line_error(invoke("train", small_text, "-o", small_text, "--vocab-size", 300, "-q"),
                   "is also an input")
    assert small_text.read_bytes() == before
    tok_before = tok_path.read_bytes()
    for fmt in ("tiktoken", "hf"):
        one_line_error(invoke("export", "-t", tok_path, "--format", fmt, "-o", tok_path),
                       "is also an input")
    assert tok_path.read_bytes() == tok_before


def test_sharded_encode_refuses_an_input_it_would_replace(tmp_path, tok_path, small_text):
    before = small_text.read_bytes()
    one_line_error(invoke("encode", small_text, "-t", tok_path, "-o", small_text,
                          "--shards", "-q"), "is also an input")
    # an input named like the manifest or a shard, in the output directory
    out = tmp_path / "out"
    out.mkdir()
    for name in ("manifest.json", "00007-old.tok"):
        inp = out / name
        inp.write_bytes(before)
        one_line_error(invoke("encode", inp, "-t", tok_path, "-o", out, "--shards", "-q"),
                       "would be replaced")
        assert inp.read_bytes() == before
        inp.unlink()
    # an input that merely lies in the output directory is fine
    inp = out / "in.txt"
    inp.write_bytes(before)
    r = invoke("encode", inp, "-t", tok_path, "-o", out, "--shards", "-q")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["00000-in.tok", "in.txt",
                                                     "manifest.json"]
    assert inp.read_bytes() == before


def test_prepare_refuses_an_input_it_would_replace(tmp_path, small_text):
    pytest.importorskip("pyarrow")
    out = tmp_path / "prep"
    r = invoke("data", "prepare", small_text, "-o", out, "-q")
    assert r.exit_code == 0, r.output
    shard = out / "shard-00000.parquet"
    before = shard.read_bytes()
    one_line_error(invoke("data", "prepare", shard, "-o", out, "-q"), "would be replaced")
    one_line_error(invoke("data", "prepare", small_text, "-o", small_text, "-q"),
                   "is also an input")
    assert shard.read_bytes() == before


# ---------------------------------------------------------------- killed runs

def _env(**extra) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(F.NO_TMPFILE_ENV, None)
    env.update(extra)
    return env


def _open_fifo_writer(fifo: Path, proc: subprocess.Popen) -> int:
    """The write end of fifo, once proc has opened it for reading."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:                             # ENXIO: no reader yet
            time.sleep(0.01)
    pytest.fail("the FIFO was never opened")


def _unnamed_file_open(pid: int, directory: Path) -> bool:
    """Whether process pid has an unnamed (O_TMPFILE) file of directory open."""
    return any(t.startswith(str(directory) + "/#") and t.endswith("(deleted)")
               for t in open_files(pid))
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory) + "/#") and target.endswith("(deleted)"):
            return True
    return False


def _default_hangup() -> None:
    """(in the child) SIGHUP at its default action even when the tests run under nohup,
    whose ignored SIGHUP the command, rightly, leaves alone."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start_and_kill(args, out_dir: Path, sig: int, *, named: bool, staging=False,
                    cwd=ROOT) -> subprocess.Popen:
    """Run `python -m harness.cli ARGS`, wait until it writes its output (an unnamed
    file it holds open, or with named=True a `.NAME.tmp-PID`, in out_dir or with
    staging=True in the staging directory there), send sig, wait for the end; the
    process, its stderr as `.err`."""
    env = _env(**({F.NO_TMPFILE_ENV: "1"} if named else {}))
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", *map(str, args)],
                            cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_default_hangup)
    where = out_dir
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if staging:
                dirs = [p for p in out_dir.glob(".staging-*") if p.is_dir()]
                where = dirs[0] if dirs else None
            if where is not None:
                if named and any(".tmp-" in p.name for p in where.iterdir()):
                    break
                if not named and _unnamed_file_open(proc.pid, where):
                    break
            time.sleep(0.01)
        else:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail(f"the output was never caught mid-write: {err.decode()[-2000:]}")
        time.sleep(0.05)                            # (mid-write; the encode of
        proc.send_signal(sig)                       # BIG_MB lasts far longer)
        proc.err = proc.communicate(timeout=60)[1]     # type: ignore[attr-defined]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGHUP])
def test_killed_encode_leaves_nothing(tmp_path, tok_path, big_text, sig):
    if not tmpfile_works(tmp_path):
        pytest.skip(f"no O_TMPFILE in {tmp_path}")
    out = tmp_path / "out"
    out.mkdir()
    proc = _start_and_kill(["encode", big_text, "-t", tok_path, "-o", out / "x.tok",
                            "--threads", 1, "-q"], out, sig, named=False)
    assert proc.returncode == -sig                  # ended by the signal
    assert list(out.iterdir()) == []                # no temporary, no partial output


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_killed_encode_removes_its_named_temporary(tmp_path, tok_path, big_text, sig):
    out = tmp_path / "out"
    out.mkdir()
    proc = _start_and_kill(["encode", big_text, "-t", tok_path, "-o", out / "x.tok",
                            "--threads", 1, "-q"], out, sig, named=True)
    assert proc.returncode == -sig, proc.err
    assert b"Traceback" not in proc.err
    assert list(out.iterdir()) == []


def test_next_run_sweeps_what_sigkill_left(tmp_path, tok_path, big_text, small_text):
    out = tmp_path / "out"
    out.mkdir()
    proc = _start_and_kill(["encode", big_text, "-t", tok_path, "-o", out / "x.tok",
                            "--threads", 1, "-q"], out, signal.SIGKILL, named=True)
    assert proc.returncode == -signal.SIGKILL
    left = hidden(out)
    assert left == [f".x.tok.tmp-{proc.pid}"]
    # someone else's temporary (a live process), and one of a dead process too new
    alive = out / f".y.tok.tmp-{os.getppid()}"
    alive.write_bytes(b"x")
    old = time.time() - 2 * F.STALE_SECONDS
    os.utime(alive, (old, old))
    r = invoke("encode", small_text, "-t", tok_path, "-o", out / "z.tok", "-q")
    assert r.exit_code == 0, r.output
    assert hidden(out) == sorted(left + [alive.name])     # the dead one is too new
    os.utime(out / left[0], (old, old))
    r = invoke("encode", small_text, "-t", tok_path, "-o", out / "z.tok", "-q")
    assert r.exit_code == 0, r.output
    assert hidden(out) == [alive.name]
    assert sorted(p.name for p in out.iterdir()) == [alive.name, "z.tok"]


def test_killed_encode_of_a_fifo_leaves_nothing(tmp_path, tok_path):
    out = tmp_path / "out"
    out.mkdir()
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    env = _env()
    proc = subprocess.Popen([sys.executable, "-m", "harness.cli", "encode", str(fifo),
                             "-t", str(tok_path), "-o", str(out / "x.tok"), "-q"],
                            cwd=ROOT, env=env, stderr=subprocess.PIPE)
    try:
        w = _open_fifo_writer(fifo, proc)
        try:
            os.write(w, KJV.read_bytes()[:50_000])     # fits the pipe; the end stays open
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                if hidden(out) or _unnamed_file_open(proc.pid, out):
                    break
                time.sleep(0.01)
            time.sleep(0.2)
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        finally:
            os.close(w)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGTERM
    assert list(out.iterdir()) == []


@pytest.mark.parametrize("named", [False, True])
def test_killed_sharded_encode_leaves_no_staging(tmp_path, tok_path, big_text, named):
    out = tmp_path / "out"
    out.mkdir()
    proc = _start_and_kill(["encode", big_text, "-t", tok_path, "-o", out, "--shards",
                            "--threads", 1, "-q"], out, signal.SIGTERM, named=named,
                           staging=True)
    assert proc.returncode == -signal.SIGTERM, proc.err
    assert list(out.iterdir()) == []


def test_sharded_staging_left_by_sigkill_is_swept(tmp_path, tok_path, big_text, small_text):
    out = tmp_path / "out"
    out.mkdir()
    proc = _start_and_kill(["encode", big_text, "-t", tok_path, "-o", out, "--shards",
                            "--threads", 1, "-q"], out, signal.SIGKILL, named=False,
                           staging=True)
    assert proc.returncode == -signal.SIGKILL
    staging = [p.name for p in out.iterdir()]
    assert len(staging) == 1 and staging[0].startswith(f".staging-{proc.pid}-")
    old = time.time() - 2 * F.STALE_SECONDS
    os.utime(out / staging[0], (old, old))
    r = invoke("encode", small_text, "-t", tok_path, "-o", out, "--shards", "-q")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["00000-in.tok", "manifest.json"]


# ------------------------------------------------------------------- shard reruns

def test_shard_rerun_replaces_the_set(tmp_path, tok_path):
    ins = []
    for name in ("a.txt", "b.txt", "c.txt"):
        p = tmp_path / name
        p.write_bytes(KJV.read_bytes()[:5_000 * (len(ins) + 1)])
        ins.append(p)
    out = tmp_path / "out"
    r = invoke("encode", *ins, "-t", tok_path, "-o", out, "--shards", "-q")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == [
        "00000-a.tok", "00001-b.tok", "00002-c.tok", "manifest.json"]
    # files that are not ours: named like a shard but not a .tok file, and anything else
    (out / "00009-notes.tok").write_text("my notes\n")
    (out / "README").write_text("keep\n")
    # an old shard the old manifest names under a name outside the pattern
    m = json.loads((out / "manifest.json").read_text())
    os.rename(out / "00002-c.tok", out / "c-renamed.tok")
    m["shards"][2]["file"] = "c-renamed.tok"
    (out / "manifest.json").write_text(json.dumps(m))
    r = invoke("encode", ins[1], ins[0], "-t", tok_path, "-o", out, "--shards", "-q")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == [
        "00000-b.tok", "00001-a.tok", "00009-notes.tok", "README", "manifest.json"]
    assert (out / "00009-notes.tok").read_text() == "my notes\n"
    m = json.loads((out / "manifest.json").read_text())
    assert [e["file"] for e in m["shards"]] == ["00000-b.tok", "00001-a.tok"]
    tok = Tokenizer.load(tok_path)
    assert read_tok(out / "00000-b.tok", tok).source_bytes == ins[1].stat().st_size


# ---------------------------------------------------------------------- modes

@pytest.mark.parametrize("named", [False, True])
def test_outputs_follow_the_umask(tmp_path, tok_path, small_text, monkeypatch, named):
    if named:
        monkeypatch.setenv(F.NO_TMPFILE_ENV, "1")
    else:
        monkeypatch.delenv(F.NO_TMPFILE_ENV, raising=False)
    old = os.umask(0o027)
    try:
        outs = [tmp_path / "t.bin", tmp_path / "x.tok", tmp_path / "e.tiktoken",
                tmp_path / "e.json", tmp_path / "shards"]
        runs = [("train", small_text, "-o", outs[0], "--vocab-size", 300, "-q"),
                ("encode", small_text, "-t", tok_path, "-o", outs[1], "-q"),
                ("export", "-t", tok_path, "--format", "tiktoken", "-o", outs[2]),
                ("export", "-t", tok_path, "--format", "hf", "-o", outs[3]),
                ("encode", small_text, "-t", tok_path, "-o", outs[4], "--shards", "-q")]
        for args in runs:
            r = invoke(*args)
            assert r.exit_code == 0, r.output
    finally:
        os.umask(old)
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p != small_text]
    assert len(written) >= 7            # with the tiktoken sidecar, shard and manifest
    for p in written:
        assert p.stat().st_mode & 0o777 == 0o640, (p, oct(p.stat().st_mode))


# ------------------------------------------------------------------ AtomicFile

@pytest.mark.parametrize("named", [False, True])
def test_atomic_file(tmp_path, monkeypatch, named):
    if named:
        monkeypatch.setenv(F.NO_TMPFILE_ENV, "1")
    elif not tmpfile_works(tmp_path):
        pytest.skip(f"no O_TMPFILE in {tmp_path}")
    target = tmp_path / "f.bin"
    target.write_bytes(b"old")
    a = F.AtomicFile(target)
    a.file.write(b"new data")
    during = sorted(p.name for p in tmp_path.iterdir())
    assert during == ([f".f.bin.tmp-{os.getpid()}", "f.bin"] if named else ["f.bin"])
    assert target.read_bytes() == b"old"
    a.commit()
    assert target.read_bytes() == b"new data"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]
    with pytest.raises(ZeroDivisionError):
        with F.AtomicFile(target) as a:
            a.file.write(b"lost")
            1 / 0
    assert target.read_bytes() == b"new data"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_commit_copies_where_linking_fails(tmp_path, monkeypatch):
    if not tmpfile_works(tmp_path):
        pytest.skip(f"no O_TMPFILE in {tmp_path}")

    def no_link(*a, **k):
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_link)
    data = os.urandom(3 << 20)
    F.write_atomic(tmp_path / "f.bin", data)
    assert (tmp_path / "f.bin").read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]


def test_sweep_stale(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead = int(done.stdout)
    old = time.time() - 2 * F.STALE_SECONDS
    names = {f".a.tok.tmp-{dead}": True, f".a.tok.tmp-{dead}.3": True,
             f".staging-{dead}-0123abcd": True,
             f".b.tok.tmp-{os.getppid()}": False,          # alive
             f".c.tok.tmp-{os.getpid()}": False,           # ours
             f".tmp-{dead}": False, "a.tok": False, f"x.tmp-{dead}": False}
    for name in names:
        p = tmp_path / name
        if name.startswith(".staging"):
            p.mkdir()
            (p / "00000-x.tok").write_bytes(b"x")
        else:
            p.write_bytes(b"x")
        os.utime(p, (old, old))
    fresh = tmp_path / f".d.tok.tmp-{dead}"                 # dead but too new
    fresh.write_bytes(b"x")
    removed = F.sweep_stale(tmp_path)
    assert sorted(removed) == sorted(n for n, gone in names.items() if gone)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [n for n, gone in names.items() if not gone] + [fresh.name])


def test_signal_handlers_only_while_a_temporary_is_held(tmp_path, monkeypatch):
    monkeypatch.setenv(F.NO_TMPFILE_ENV, "1")
    hangup = signal.getsignal(signal.SIGHUP)    # (SIG_IGN under nohup: left so)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    with F.raise_on_signals():
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
        a = F.AtomicFile(tmp_path / "x")
        assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        with pytest.raises(F.Terminated):
            signal.raise_signal(signal.SIGTERM)
            time.sleep(1)                       # the handler runs before this ends
        a.discard()
        assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    assert signal.getsignal(signal.SIGHUP) == hangup
    assert list(tmp_path.iterdir()) == []
