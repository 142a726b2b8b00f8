"""The base of every error asmbpe raises on purpose: bad input, a bad file, a failed
download, a library that cannot load or train. `except AsmbpeError` catches them all;
each also keeps its older base where it had one (TokFileError and TokenizerFileError
are ValueErrors, TrainError and LibraryError RuntimeErrors). The messages are one line:
the `asmbpe` command prints them as `asmbpe: error: MESSAGE`."""
from __future__ import annotations

__all__ = ["AsmbpeError"]


class AsmbpeError(Exception):
    """An expected failure of asmbpe, with a one-line message."""
