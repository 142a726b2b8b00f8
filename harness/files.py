"""Writing output files safely: the one place for "temporary name, then rename"."""
from __future__ import annotations

import os
import tempfile


def write_atomic(path, data: bytes | str) -> None:
    """Write data (str as UTF-8) to a temporary file beside path, fsync it, then rename
    it over path: path holds its old content or the complete new file, never a part.
    The temporary file is removed when anything fails."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    path = os.fspath(path)
    directory, name = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
