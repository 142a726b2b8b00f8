"""asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
assembly.  This package builds on libasmbpe.so (run `python build.py`)."""
from . import twin
from ._lib import LibraryError
from .pretok import split, split_offsets
from .tokenizer import Tokenizer
from .train import TrainError, TrainResult, train

__all__ = ["split", "split_offsets", "twin", "LibraryError", "train", "TrainResult",
           "TrainError", "Tokenizer"]
