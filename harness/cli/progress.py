"""Progress on stderr for the `asmbpe` commands: training (a bar while counting, then
merges done, live), work measured in source bytes (encode, prepare), downloads."""
from __future__ import annotations

import sys
import threading
import time

import click


class TrainProgress:
    """harness.train's progress callback for the terminal (stderr): a bar while counting
    (by text bytes, MB/s), then, while the merge loop runs inside one library call
    (cffi releases the GIL, so a thread can draw it), merges done, merges/s and the
    current winning count, read live from the library's output arrays."""

    SPIN = "|/-\\"

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.err = sys.stderr
        self.tty = self.err.isatty()
        self.bar = None
        self.t_count = None
        self.counted = 0
        self.t_merge = None
        self.stop = threading.Event()
        self.thread = None
        self.live = None

    def set_live(self, live) -> None:
        """live() -> (merges done, winning count of the latest merge)."""
        self.live = live

    def __call__(self, phase: str, done: int, total):
        if not self.enabled:
            return
        now = time.perf_counter()
        if phase == "count":
            if self.t_count is None:
                self.t_count = now
                if total:
                    self.bar = click.progressbar(length=total, label="counting", file=self.err,
                                                 show_eta=True, item_show_func=lambda x: x)
                    self.bar.__enter__()
            rate = done / 1e6 / (now - self.t_count) if now > self.t_count else 0.0
            if self.bar is not None:
                self.bar.update(done - self.counted, f"{done / 1e6:.1f} MB, {rate:.1f} MB/s")
            elif self.tty:
                self.err.write(f"\rcounting: {done / 1e6:.1f} MB, {rate:.1f} MB/s")
                self.err.flush()
            self.counted = done
        elif phase == "merge" and done == 0 and self.t_merge is None:
            self._end_count(now)
            self.t_merge = now
            if self.tty:
                self.thread = threading.Thread(target=self._spin, args=(total,), daemon=True)
                self.thread.start()
            else:
                click.echo(f"merging: up to {total} merges ...", err=True)
        elif phase == "merge":
            self.close()

    def _end_count(self, now: float) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
        elif self.tty and self.t_count is not None:
            self.err.write("\n")
        if self.t_count is not None:
            took = now - self.t_count
            rate = self.counted / 1e6 / took if took > 0 else 0.0
            click.echo(f"counted {self.counted / 1e6:.1f} MB in {took:.2f} s ({rate:.1f} MB/s)",
                       err=True)

    def _spin(self, total: int) -> None:
        k = 0
        while not self.stop.wait(0.1):
            took = time.perf_counter() - self.t_merge
            if self.live is not None:
                m, count = self.live()
                rate = m / took if took > 0 else 0.0
                self.err.write(f"\rmerging: {m}/{total} merges, {rate:,.0f} merges/s, "
                               f"winning count {count:,} {self.SPIN[k % 4]} {took:.1f} s ")
            else:
                self.err.write(f"\rmerging: up to {total} merges {self.SPIN[k % 4]} {took:.1f} s")
            self.err.flush()
            k += 1

    def close(self) -> None:
        if self.thread is not None:
            self.stop.set()
            self.thread.join()
            self.thread = None
            self.err.write("\r\x1b[K")
            self.err.flush()
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


class BytesProgress:
    """A progress display on stderr for work measured in source bytes: a bar (MB done,
    MB/s) when the total is known, else a counter line on a terminal; nothing when
    disabled."""

    def __init__(self, label: str, total: int | None, enabled: bool = True):
        self.label = label
        self.enabled = enabled
        self.err = sys.stderr
        self.t0 = time.perf_counter()
        self.done = 0
        self.bar = None
        if enabled and total:
            self.bar = click.progressbar(length=total, label=label, file=self.err,
                                         show_eta=True, item_show_func=lambda x: x)
            self.bar.__enter__()

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        took = time.perf_counter() - self.t0
        info = f"{done / 1e6:.1f} MB, {done / 1e6 / took if took > 0 else 0.0:.1f} MB/s"
        if self.bar is not None:
            self.bar.update(done - self.done, info)
        elif self.err.isatty():
            self.err.write(f"\r{self.label}: {info}")
            self.err.flush()
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None
        elif self.enabled and self.done and self.err.isatty():
            self.err.write("\n")
            self.done = 0


class FetchProgress:
    """One progress bar per file on stderr (bytes, MB/s)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.name = None
        self.bar = None
        self.done = 0

    def __call__(self, name: str, done: int, total) -> None:
        if not self.enabled:
            return
        if name != self.name or done < self.done:
            self.close()
            self.name, self.done = name, done
            self.bar = BytesProgress(f"fetching {name}", total)
            self.bar.done = done
        self.bar(done)
        self.done = done

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        self.name, self.done = None, 0
