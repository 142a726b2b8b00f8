"""asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
assembly.  This package builds on libasmbpe.so (run `python build.py`)."""
from ._lib import LibraryError
from ._version import __version__
from .pretok import split, split_offsets
from .tokenizer import Tokenizer
from .train import TrainError, TrainResult, train

__all__ = ["split", "split_offsets", "LibraryError", "train", "TrainResult",
           "TrainError", "Tokenizer", "__version__"]
