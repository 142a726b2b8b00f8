"""asmbpe: a byte-level BPE tokenizer whose hot paths are hand-written x86-64
assembly.  This package builds on libasmbpe.so (run `python build.py`).

    import harness
    result = harness.train(["some text", ...], vocab_size=4096)   # -> TrainResult
    tok = result.tokenizer                                       # a Tokenizer
    ids = tok.encode("hello world")

The names below load on first use (PEP 562), so `import harness` alone loads neither
numpy nor cffi nor the library.
"""
from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING

from ._version import __version__

# name -> the module (relative to this package) that defines it
_LAZY = {
    "Tokenizer": "tokenizer",
    "TokenizerFileError": "tokenizer",
    "train": "train",
    "TrainResult": "train",
    "TrainError": "train",
    "split": "pretok",
    "split_offsets": "pretok",
    "AsmbpeError": "errors",
    "OutOfMemory": "errors",
    "LibraryError": "_lib",
    "InputError": "corpora",
    "FetchError": "fetch",
    "TokFile": "tokfile",
    "TokFileError": "tokfile",
    "read_tok": "tokfile",
}

__all__ = ["__version__", *_LAZY]

if TYPE_CHECKING:
    from ._lib import LibraryError
    from .corpora import InputError
    from .errors import AsmbpeError, OutOfMemory
    from .fetch import FetchError
    from .pretok import split, split_offsets
    from .tokenizer import Tokenizer, TokenizerFileError
    from .tokfile import TokFile, TokFileError, read_tok
    from .train import TrainError, TrainResult, train


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value             # later look-ups skip __getattr__
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


class _Package(ModuleType):
    """`harness.train` is the function, as it always was, though `harness/train.py` is
    also a submodule: importing that submodule (`from harness.train import ...`) binds
    it on the package, which would hide the function from `__getattr__`; this binds
    the function instead."""

    def __setattr__(self, name, value):
        if isinstance(value, ModuleType) and _LAZY.get(name) == name:
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
