"""asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
assembly.  This package builds on libasmbpe.so (run `python build.py`)."""
import os as _os
import sys as _sys

# The `asmbpe` command calls no BLAS, but numpy's OpenBLAS starts a thread per core
# that spins for about 0.1 s of CPU as numpy loads, on the cores the reader and the
# encoder need (docs/OPTIMIZATION_LOG.md, E51). Only in that process, and only before
# numpy is loaded; a program that imports harness keeps its own settings.
if (_sys.argv and _os.path.basename(_sys.argv[0]) == "asmbpe"
        and "numpy" not in _sys.modules):
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from ._lib import LibraryError
from .pretok import split, split_offsets
from .tokenizer import Tokenizer
from .train import TrainError, TrainResult, train

__all__ = ["split", "split_offsets", "LibraryError", "train", "TrainResult",
           "TrainError", "Tokenizer"]
