"""Writing output files safely: the one place for "temporary, then rename".

`AtomicFile(path)` gives a binary file object (`.file`) whose content replaces `path`
only at `.commit()`; `.discard()` (or an exception in its `with` block) drops it.
Where the file system allows, the data goes into an unnamed file (`O_TMPFILE` in the
target's directory), which is given a name (`linkat` through `/proc/self/fd`) only
once it is complete and fsynced, and then renamed over the target: until then
nothing named exists, and a process killed even by SIGKILL leaves nothing behind.
Elsewhere (a file system without O_TMPFILE, no /proc, or ASMBPE_NO_TMPFILE=1, which
the tests use to force this path) the data goes into a named temporary `.NAME.tmp-PID`
beside the target. Both follow the umask (mode 0666 & ~umask), like any new file.

A named temporary is removed on an exception, including the `Terminated` that SIGTERM
and SIGHUP raise under `raise_on_signals()` (the command line's) while one is held.
What a SIGKILL leaves, `.NAME.tmp-PID` files and `.staging-PID-RUN` directories
(harness.distributed), is swept by `sweep_stale(directory)`, which every AtomicFile
runs on its directory: an entry whose process no longer exists and that has not
changed for STALE_SECONDS is removed. (The PID is looked up on this machine: a
directory that processes on several machines write at once could lose a temporary
that another machine's process has left untouched for that long.)
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

__all__ = ["AtomicFile", "write_atomic", "temp_name", "staging_name", "staging_dir",
           "sweep_stale", "Terminated", "raise_on_signals", "holding", "STALE_SECONDS",
           "NO_TMPFILE_ENV"]

STALE_SECONDS = 60.0                # a dead process's temporary older than this goes
NO_TMPFILE_ENV = "ASMBPE_NO_TMPFILE"  # "1": always a named temporary (for the tests)
_NAME_MAX = 200                     # the target's name in a temporary's, at most

# the naming scheme of temporaries: .NAME.tmp-PID[.N] and .staging-PID-RUN
_TEMP_RE = re.compile(r"\..+\.tmp-(?P<pid>\d+)(?:\.\d+)?")
_STAGING_RE = re.compile(r"\.staging-(?P<pid>\d+)-[0-9a-f]+")
# O_TMPFILE's errors where the file system (or an old kernel) cannot make one
_NO_TMPFILE = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP}


def temp_name(name: str, n: int = 0) -> str:
    """The name of this process's temporary for the target file `name`: `.NAME.tmp-PID`,
    `.NAME.tmp-PID.N` for the N-th try when that one exists."""
    return f".{name[:_NAME_MAX]}.tmp-{os.getpid()}" + (f".{n}" if n else "")


def staging_name(run: str) -> str:
    """The name of this process's staging directory for run `run` (hex digits)."""
    return f".staging-{os.getpid()}-{run}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:                 # EPERM: it exists, someone else's
        return True
    return True


def sweep_stale(directory) -> list[str]:
    """Remove the temporaries (`.NAME.tmp-PID`) and staging directories
    (`.staging-PID-RUN`) in `directory` whose process no longer exists and that have not
    changed for STALE_SECONDS; the names removed. Problems (another process sweeping at
    the same time, no permission) are ignored."""
    removed = []
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    for e in entries:
        m = _TEMP_RE.fullmatch(e.name) or _STAGING_RE.fullmatch(e.name)
        if m is None or int(m["pid"]) == os.getpid() or _alive(int(m["pid"])):
            continue
        try:
            if now - e.stat(follow_symlinks=False).st_mtime < STALE_SECONDS:
                continue
            if e.is_dir(follow_symlinks=False):
                shutil.rmtree(e.path)
            else:
                os.unlink(e.path)
            removed.append(e.name)
        except OSError:
            pass
    return removed


def _open_unnamed(directory: str) -> int | None:
    """An O_TMPFILE file in `directory` (0666 & ~umask; read-write, so that it can still
    be copied if naming it fails), or None where the file system, the kernel or the lack
    of /proc rules it out."""
    flag = getattr(os, "O_TMPFILE", None)
    if flag is None or os.environ.get(NO_TMPFILE_ENV) == "1":
        return None
    try:
        fd = os.open(directory, flag | os.O_RDWR, 0o666)
    except OSError as e:
        if e.errno in _NO_TMPFILE:
            return None
        raise
    if not os.path.exists(f"/proc/self/fd/{fd}"):       # no way to name it later
        os.close(fd)
        return None
    return fd


def _create_named(directory: str, name: str, make) -> str:
    """make(path) at the first free temporary name of `name` in `directory`; that path."""
    for n in range(1000):
        tmp = os.path.join(directory, temp_name(name, n))
        try:
            make(tmp)
        except FileExistsError:
            continue
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", os.path.join(directory, name))


class AtomicFile:
    """A new file for `path` that replaces it only when complete:

        with AtomicFile(path) as a:        # or a = AtomicFile(path); ...; a.commit()
            a.file.write(data)             # commit at the end, discard on an exception

    `.file` is a binary file object (write-only, seekable). `commit()` flushes, fsyncs
    and renames it over `path` (which keeps its old content until then); `discard()`
    drops it. See the module doc for the unnamed file and the named fallback `.tmp`
    (None while the data has no name)."""

    def __init__(self, path):
        self.path = Path(path)
        self._dir = os.path.dirname(os.path.abspath(self.path))
        sweep_stale(self._dir)
        self.tmp: str | None = None
        fd = _open_unnamed(self._dir)
        if fd is None:
            self._new_name(self._create)
            fd = self._fd
        try:
            self.file = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            self.discard()
            raise

    def _new_name(self, make) -> None:
        """make(path) at a fresh temporary name (.tmp); held (see hold) until it goes."""
        hold()
        try:
            self.tmp = _create_named(self._dir, self.path.name, make)
        except BaseException:
            release()
            raise

    def _create(self, tmp: str) -> None:
        self._fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)

    def _name(self, tmp: str) -> None:
        dirfd = os.open(self._dir, os.O_RDONLY | os.O_DIRECTORY)
        try:        # dst_dir_fd makes it linkat(AT_SYMLINK_FOLLOW): the file, not the link
            os.link(f"/proc/self/fd/{self.file.fileno()}", os.path.basename(tmp),
                    dst_dir_fd=dirfd, follow_symlinks=True)
        finally:
            os.close(dirfd)

    def _copy(self, tmp: str) -> None:
        """Where the unnamed file cannot be linked: copy it into a named temporary."""
        self._create(tmp)
        try:
            src, offset = self.file.fileno(), 0
            while block := memoryview(os.pread(src, 16 << 20, offset)):
                offset += len(block)
                while block:
                    block = block[os.write(self._fd, block):]
            os.fsync(self._fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        finally:
            os.close(self._fd)

    def commit(self) -> None:
        """Complete the file: flush, fsync, rename it over `path`. On an error the new
        file is discarded (and the error raised); `path` is untouched."""
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            if self.tmp is None:            # linkat cannot overwrite: a fresh name first
                try:
                    self._new_name(self._name)
                except OSError as e:
                    if e.errno not in (errno.EXDEV, errno.ENOENT, errno.EPERM,
                                       errno.EACCES, errno.EOPNOTSUPP):
                        raise
                    self._new_name(self._copy)
            self.file.close()
            os.replace(self.tmp, self.path)
            self.tmp = None
            release()
        except BaseException:
            self.discard()
            raise

    def discard(self) -> None:
        """Drop the new file (close it, remove its temporary name); `path` is untouched.
        Safe to call more than once."""
        f = getattr(self, "file", None)
        if f is not None and not f.closed:
            with contextlib.suppress(OSError):
                f.close()
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None
            release()

    def __enter__(self) -> "AtomicFile":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.commit()
        else:
            self.discard()
        return False


def write_atomic(path, data: bytes | str) -> None:
    """Write data (str as UTF-8) to `path` through an AtomicFile: path holds its old
    content or the complete new file, never a part, and nothing else is left."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    with AtomicFile(path) as a:
        a.file.write(data)


# ------------------------------------------------------------------------------ signals

SIGNALS = (signal.SIGTERM, signal.SIGHUP)
_signals = {"armed": False, "held": 0, "installed": []}
_signals_lock = threading.Lock()


class Terminated(BaseException):
    """Raised in the main thread for SIGTERM or SIGHUP (see raise_on_signals), so that
    the `except BaseException` / `finally` clean-ups run (like KeyboardInterrupt for
    SIGINT). `.signum`: the signal; `.resend()` ends the process by it."""

    def __init__(self, signum: int):
        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")

    def resend(self) -> None:
        """End the process by the signal's default action (its status says so), or
        with status 128 + signum where that does not end it."""
        signal.signal(self.signum, signal.SIG_DFL)
        signal.raise_signal(self.signum)
        raise SystemExit(128 + self.signum)


def _on_signal(signum, frame):
    for s in _signals["installed"]:     # once: the clean-up is not cut short
        signal.signal(s, signal.SIG_IGN)
    raise Terminated(signum)


def _install() -> None:
    st = _signals
    if not st["armed"] or st["installed"] or \
            threading.current_thread() is not threading.main_thread():
        return
    # a signal not at its default (nohup's SIGHUP: ignored) is left alone
    st["installed"] = [s for s in SIGNALS if signal.getsignal(s) == signal.SIG_DFL]
    for s in st["installed"]:
        signal.signal(s, _on_signal)


def _uninstall() -> None:
    st = _signals
    if st["installed"] and threading.current_thread() is threading.main_thread():
        for s in st["installed"]:
            signal.signal(s, signal.SIG_DFL)
        st["installed"] = []


def hold() -> None:
    """This process now holds a named temporary (a file or a staging directory) that a
    SIGTERM or SIGHUP should not leave behind: under raise_on_signals(), those signals
    raise Terminated in the main thread until as many release() calls."""
    with _signals_lock:
        _signals["held"] += 1
        _install()


def release() -> None:
    """One held temporary is gone (see hold)."""
    with _signals_lock:
        _signals["held"] -= 1
        if not _signals["held"]:
            _uninstall()


@contextlib.contextmanager
def holding():
    """hold() while inside, release() on the way out."""
    hold()
    try:
        yield
    finally:
        release()


@contextlib.contextmanager
def raise_on_signals():
    """The command line's: while inside, SIGTERM and SIGHUP raise Terminated in the main
    thread whenever a named temporary is held (see holding; once: later ones are
    ignored), so that it is removed on the way out; the default handlers are back on
    the way out. At other times they keep their default action, so that a long call
    into the library (which delays Python's handlers) is ended at once, and an unnamed
    O_TMPFILE file needs no handler: the kernel drops it."""
    with _signals_lock:
        _signals["armed"] = True
        if _signals["held"]:
            _install()
    try:
        yield
    finally:
        with _signals_lock:
            _signals["armed"] = False
            _uninstall()


@contextlib.contextmanager
def staging_dir(parent, run: str):
    """A new staging directory `parent/.staging-PID-RUN` (staging_name), held (see
    holding) while inside and removed, with what is in it, on the way out."""
    path = Path(parent) / staging_name(run)
    with holding():
        path.mkdir()
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)
