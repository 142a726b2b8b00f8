"""The `asmbpe` command line (click).

    asmbpe split FILE|-          chunks of FILE joined by |  (--pretokenizer NAME: nanochat)
    asmbpe train INPUT... -o tokenizer.bin   learn merges (SPEC §4), write tokenizer.bin
                                 (--pretokenizer NAME, default nanochat, kept in the file)
    asmbpe encode INPUT... -t tokenizer.bin -o out.tok [--chat]   encode into a .tok file
    asmbpe decode FILE.tok -t tokenizer.bin     the text of a .tok file, on stdout
    asmbpe show -t tokenizer.bin TEXT_OR_FILE   each token on its own colour
    asmbpe stats FILE.tok|INPUT... -t tokenizer.bin   documents, bytes/token, top tokens
    asmbpe export -t tokenizer.bin --format tiktoken|hf -o PATH
    asmbpe check                 checkasm: the assembly against the twin
    asmbpe bench pretok          pre-tokenizer speed on the shared corpora (--pretokenizer)
    asmbpe bench train           training speed against rustbpe, tokenizers, gigatoken
    asmbpe bench encode          encoding speed against tiktoken, tokenizers, gigatoken
    asmbpe bench ladder          the optimization ladder: naive Python -> asmbpe, rung by rung
    asmbpe profile train|encode|pretok   cycles per phase and thread [--perf --callgrind --plot]
                                 (--cluster: the distributed path against one process)
    asmbpe data fetch fineweb-edu|smoltalk --shards 0-3   download shards into the cache
    asmbpe data prepare INPUT... -o DIR                   local files -> Parquet shards
    asmbpe --version             print the version

Errors about the input or the environment are one line on stderr,
`asmbpe: error: ...`, and exit status 1; never a traceback.
"""
from __future__ import annotations

import os
import sys

# The `asmbpe` command calls no BLAS, but numpy's OpenBLAS starts a thread per core
# that spins for about 0.1 s of CPU as numpy loads, on the cores the reader and the
# encoder need (docs/OPTIMIZATION_LOG.md, E51). So before anything below imports numpy,
# and only when nothing has loaded it yet; a program that imports harness (and not the
# command line) keeps its own settings.
if "numpy" not in sys.modules:
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import importlib  # noqa: E402

import click  # noqa: E402

from .._version import __version__  # noqa: E402
from ..errors import AsmbpeError, OutOfMemory, memory_phase  # noqa: E402
from ..files import Terminated, raise_on_signals  # noqa: E402
from .common import CONTEXT, _fail, _quiet_broken_pipe  # noqa: E402

__all__ = ["asmbpe", "main"]

# Each command's module is imported when the command is looked up, so that `asmbpe
# train` does not import the modules of the others (encode, data, the development
# tools; log T115): name -> (module of harness.cli, the command's attribute).
_COMMANDS = {
    "split": ("encode", "split"), "train": ("train", "train"),
    "encode": ("encode", "encode"), "decode": ("encode", "decode"),
    "show": ("encode", "show"), "stats": ("encode", "stats"),
    "export": ("encode", "export"), "check": ("dev", "check"), "bench": ("dev", "bench"),
    "data": ("data", "data"), "profile": ("dev", "profile"),
}


class _Group(click.Group):
    """Turns the harness's expected errors into one line on stderr and exit 1; loads
    each command's module on first use (_COMMANDS)."""

    def list_commands(self, ctx):
        return sorted(set(self.commands) | set(_COMMANDS))

    def get_command(self, ctx, name):
        if name not in self.commands and name in _COMMANDS:
            module, attr = _COMMANDS[name]
            cmd = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
            self.add_command(cmd, name)
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        try:
            with raise_on_signals():        # SIGTERM, SIGHUP: Terminated, so that the
                return self._invoke(ctx)    # temporaries are removed on the way out
        except Terminated as e:
            e.resend()                      # then the process ends by the signal

    def _invoke(self, ctx):
        try:
            # memory that runs out anywhere (numpy, pyarrow, the library, a thread's
            # stack) is an OutOfMemory: one line, like the errors below
            with memory_phase("running asmbpe"):
                return super().invoke(ctx)
        except OutOfMemory as e:
            name = ctx.invoked_subcommand or ""
            if e.phase == "running asmbpe":     # (the command is known by now)
                e.phase += f" {name}"
            _fail(_memory_message(e, self.get_command(ctx, name)))
        except AsmbpeError as e:
            _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
        except BrokenPipeError:             # `asmbpe train ... | head -1`: end quietly
            _quiet_broken_pipe()
        except OSError as e:
            name = f"{e.filename}: " if getattr(e, "filename", None) else ""
            _fail(f"{name}{e.strerror or e}")


def _memory_message(e: OutOfMemory, command) -> str:
    """`out of memory while PHASE (DETAIL; try --memory SIZE or fewer --threads)`, the
    advice naming the options `command` has."""
    names = {p.name for p in getattr(command, "params", ())}
    tips = [tip for name, tip in (("memory", "--memory SIZE"), ("threads", "fewer --threads"))
            if name in names]
    inside = "; ".join(x for x in (e.detail, "try " + " or ".join(tips) if tips else "") if x)
    return f"out of memory while {e.phase}" + (f" ({inside})" if inside else "")


@click.group(cls=_Group, context_settings=CONTEXT)
@click.version_option(__version__, "--version", prog_name="asmbpe",
                      message="%(prog)s %(version)s", help="Print the version and exit.")
def asmbpe():
    """asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
    assembly (libasmbpe.so, built with `python build.py`)."""


def main(argv=None):
    """Console entry point (`asmbpe`)."""
    return asmbpe.main(args=argv, prog_name="asmbpe")
