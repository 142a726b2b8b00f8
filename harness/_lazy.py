"""numpy on first use, for the modules on the path of `asmbpe train`.

Importing numpy costs 60-80 ms, about a tenth of a whole `asmbpe train` of 60 MB, and
training needs none of it: the text goes from the Parquet pages into the library's
buffers, the merges come back in cffi arrays, and tokenizer.bin is written from their
bytes. A module that only sometimes needs numpy binds

    np = lazy_numpy(globals())

in place of `import numpy as np`; the first attribute looked up on it (`np.zeros`)
imports numpy and rebinds the module's global `np` to numpy itself, so every later
lookup is the plain one. (Annotations are strings there: `from __future__ import
annotations`.) tests/test_cli.py checks that `asmbpe train` never imports numpy.
"""
from __future__ import annotations

import importlib


class LazyModule:
    """Stands for module `name` bound to `attr` in the globals `namespace` until the
    first attribute lookup, which imports it (the import system's lock makes that
    safe from any thread) and rebinds `namespace[attr]` to it."""

    __slots__ = ("_name", "_namespace", "_attr")

    def __init__(self, name: str, namespace: dict, attr: str) -> None:
        self._name, self._namespace, self._attr = name, namespace, attr

    def __getattr__(self, key: str):
        module = importlib.import_module(self._name)
        self._namespace[self._attr] = module
        return getattr(module, key)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported on first use>"


def lazy_numpy(namespace: dict) -> LazyModule:
    """`np = lazy_numpy(globals())`: numpy as `np`, imported when first used."""
    return LazyModule("numpy", namespace, "np")
