"""The `asmbpe` command line (click).

    asmbpe split FILE            chunks of FILE joined by |
    asmbpe check                 checkasm: the assembly against the twin
    asmbpe bench pretok          pre-tokenizer speed on the shared corpora

Errors about the input or the environment are one line on stderr,
`asmbpe: error: ...`, and exit status 1; never a traceback.
"""
from __future__ import annotations

import sys

import click

from ._lib import LibraryError
from .corpora import InputError, available, check_file, corpora_dir

CONTEXT = dict(help_option_names=["-h", "--help"])


def _fail(message: str) -> None:
    click.echo(f"asmbpe: error: {message}", err=True)
    sys.exit(1)


class _Group(click.Group):
    """Turns the harness's expected errors into one line on stderr and exit 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except (InputError, LibraryError) as e:
            _fail(str(e).splitlines()[0] if str(e) else type(e).__name__)
        except OSError as e:
            name = f"{e.filename}: " if getattr(e, "filename", None) else ""
            _fail(f"{name}{e.strerror or e}")


@click.group(cls=_Group, context_settings=CONTEXT)
def asmbpe():
    """asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
    assembly (libasmbpe.so, built with `python build.py`)."""


@asmbpe.command(context_settings=CONTEXT)
@click.argument("file", type=click.Path(dir_okay=True, path_type=str))
def split(file):
    """Print the pre-tokenizer chunks of FILE (raw bytes) joined by |."""
    from .pretok import split as asm_split

    path = check_file(file)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{file}: cannot read: {e.strerror or e}") from None
    if not data:
        raise InputError(f"{file}: is empty")
    chunks = asm_split(data)
    stdout = sys.stdout.buffer
    try:
        stdout.write(b"|".join(chunks) + b"\n")
        stdout.flush()
    except BrokenPipeError:                 # `asmbpe split FILE | head`
        _quiet_broken_pipe()


def _quiet_broken_pipe() -> None:
    import os

    # stdout is gone; point it at /dev/null so the exit-time flush does not complain
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(0)


@asmbpe.command(context_settings=CONTEXT)
@click.option("--seed", type=int, default=None, help="Random seed (default: a new one, printed).")
@click.option("--function", "pattern", default="*", show_default=True, metavar="GLOB",
              help="Check only the functions whose name matches GLOB.")
@click.option("--bench", is_flag=True, help="Also time each checked function.")
def check(seed, pattern, bench):
    """Check the assembly functions against their Python twins (checkasm)."""
    from .checkasm import run_checks

    if not run_checks(seed=seed, pattern=pattern, bench=bench):
        sys.exit(1)


@asmbpe.group(context_settings=CONTEXT)
def bench():
    """Benchmarks (single thread, text in memory, median of several runs)."""


# Later sub-commands of `bench` (train, encode) go here, next to `pretok`.


@bench.command(context_settings=CONTEXT)
@click.option("--corpus", "corpora", multiple=True, metavar="NAME",
              type=click.Choice(["english", "multilingual", "code"]),
              help="english, multilingual or code (repeatable; default: every one available).")
@click.option("--limit-mb", type=click.FloatRange(min=0), default=32, show_default=True,
              help="Read about this many MB of whole documents per corpus (0 = all).")
@click.option("--twin-mb", type=click.FloatRange(min=0), default=1, show_default=True,
              help="MB given to the (slow) Python twin.")
@click.option("--runs", type=click.IntRange(min=1), default=5, show_default=True,
              help="Timed runs; the median is reported.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              metavar="PATH", help="Also write the rows as JSON to PATH.")
def pretok(corpora, limit_mb, twin_mb, runs, json_path):
    """Pre-tokenizer speed: asm vs the oracle regex vs the Python twin."""
    from .bench import bench_pretok, write_json

    if not corpora_dir().is_dir():
        raise InputError(f"corpora directory not found: {corpora_dir()} "
                         "(put shared/ next to the repository or set ASMBPE_CORPORA)")
    names = list(corpora) or available()
    if not names:
        raise InputError(f"no corpus (english|multilingual|code).parquet in {corpora_dir()}")
    rows = bench_pretok(names, limit_mb, twin_mb, runs=runs, out=click.echo)
    if json_path:
        write_json(rows, json_path)
        click.echo(f"wrote {len(rows)} rows to {json_path}")


# Room for the rest of SPEC §9's commands, each in this file as its own
# @asmbpe.command: train, encode, decode, show, stats, export (and profile).


def main(argv=None):
    """Console entry point (`asmbpe`)."""
    return asmbpe.main(args=argv, prog_name="asmbpe")


if __name__ == "__main__":
    main()
