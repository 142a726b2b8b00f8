"""Build the API reference of the `harness` package (asmbpe's Python API) as HTML, with
pdoc, from the docstrings and type hints:

    python tools/apidoc.py -o build/api        # then open build/api/index.html

`harness` (the package page, harness.html) is the public face: Tokenizer, train,
TrainResult, split, split_offsets, read_tok, TokFile and the errors; the modules
beside it are documented too, except the development tools (harness.dev) and the
command line (harness.cli, documented by `asmbpe --help`). Nothing needs the built
library: harness imports its names lazily and loads libasmbpe.so on the first call
that runs assembly. pdoc comes with the `test` extra (`pip install -e '.[test]'`) or
`pip install pdoc`. The output is not checked in.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def modules() -> list[str]:
    """The modules to document: harness, then each public module file beside it (not
    the subpackages harness.dev and harness.cli; named one by one, since pdoc walks
    only the submodules that a package's __all__ names, harness.train)."""
    import harness
    return ["harness"] + sorted(f"harness.{p.stem}" for p in (ROOT / "harness").glob("*.py")
                                if not p.stem.startswith("_") and p.stem not in harness.__all__)


def build(output: Path) -> None:
    """Write the HTML reference into `output` (harness.html is the package page)."""
    try:
        import pdoc
        import pdoc.render
    except ImportError:
        sys.exit("apidoc: pdoc is not installed (pip install pdoc, or pip install -e "
                 "'.[test]')")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))         # the checkout's harness, installed or not
    pdoc.render.configure(docformat="markdown", show_source=False,
                          footer_text="asmbpe")
    pdoc.pdoc(*modules(), output_directory=output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "build" / "api",
                        help="the directory to write (default: build/api)")
    args = parser.parse_args(argv)
    build(args.output)
    print(f"wrote the API reference to {args.output / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
