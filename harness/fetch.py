"""Downloading public datasets (FineWeb-Edu, SmolTalk) from a Hugging Face-style
dataset repository, over HTTPS, with the standard library only.

    path = fetch_file("HuggingFaceFW/fineweb-edu", "sample/10BT/000_00000.parquet")
    paths = fetch_shards("fineweb-edu", [0, 1, 2])

A file's URL is `{base}/datasets/{repo}/resolve/{revision}/{path}`; `base` is the
`base_url` argument, else $ASMBPE_HF_ENDPOINT, else $HF_ENDPOINT, else
https://huggingface.co (tests point it at a server on 127.0.0.1). Files land in the
cache directory (`cache_dir`, else $ASMBPE_CACHE, else ~/.cache/asmbpe) under
`{repo}/{path}`.

How a download goes:

- Redirects are followed by hand, so the headers of every hop are seen: the Hub
  answers a resolve URL of an LFS file with a redirect carrying `X-Linked-Size` (the
  size) and `X-Linked-Etag` (the sha256 of the content). Without them the size comes
  from `Content-Range` / `Content-Length` and there is no hash to check.
- The bytes go to `{dest}.part`. A `.part` left by an interrupted run (or by a dropped
  connection in this one: up to `retries` more attempts, with a growing pause) is
  resumed with an HTTP range request (`Range: bytes=N-`); a server that answers 200
  instead of 206 is read from the start again.
- When the size is reached the file is checked: its size, and its sha256 when the
  server gave one (the whole file is hashed once it is complete). A mismatch
  deletes the `.part` and raises FetchError: a corrupted file is never kept. A good
  file is renamed to `dest` (atomic), so a file in the cache is always a complete,
  checked one, and a later fetch of it does no network I/O.
"""
from __future__ import annotations

import hashlib
import http.client
import os
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .errors import AsmbpeError

__all__ = ["FetchError", "DATASETS", "Dataset", "base_url", "cache_dir", "file_url",
           "fetch_file", "fetch_shards", "shard_paths", "parse_shards", "ENV_ENDPOINT",
           "ENV_CACHE", "DEFAULT_ENDPOINT"]

DEFAULT_ENDPOINT = "https://huggingface.co"
ENV_ENDPOINT = "ASMBPE_HF_ENDPOINT"
ENV_CACHE = "ASMBPE_CACHE"
CHUNK = 1 << 20
USER_AGENT = "asmbpe-fetch/0.1 (+python urllib)"

Progress = Callable[[str, int, "int | None"], None]     # (name, bytes done, total)


class FetchError(AsmbpeError):
    """A download that failed or a file that did not check out; one-line message."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Dataset:
    """A dataset repository and how its shard files are named."""

    repo: str
    pattern: str            # str.format with config, index, of
    config: str             # default config
    of: int | None = None   # total shards of the default config (the "-of-N" part)
    doc: str = ""

    def path(self, index: int, config: str | None = None, of: int | None = None) -> str:
        return self.pattern.format(config=config or self.config, index=index,
                                   of=of if of is not None else (self.of or 0))


DATASETS = {
    "fineweb-edu": Dataset("HuggingFaceFW/fineweb-edu", "{config}/{index:03d}_00000.parquet",
                           "sample/10BT", None,
                           "FineWeb-Edu Parquet shards (`text` column), e.g. "
                           "sample/10BT/000_00000.parquet"),
    "smoltalk": Dataset("HuggingFaceTB/smoltalk",
                        "data/{config}/train-{index:05d}-of-{of:05d}.parquet", "all", 9,
                        "SmolTalk conversations (`messages` column), e.g. "
                        "data/all/train-00000-of-00009.parquet"),
}


def base_url(url: str | None = None) -> str:
    return (url or os.environ.get(ENV_ENDPOINT) or os.environ.get("HF_ENDPOINT")
            or DEFAULT_ENDPOINT).rstrip("/")


def cache_dir(path=None) -> Path:
    if path:
        return Path(path)
    env = os.environ.get(ENV_CACHE)
    return Path(env) if env else Path.home() / ".cache" / "asmbpe"


def file_url(repo: str, path: str, revision: str = "main", base: str | None = None) -> str:
    quoted = "/".join(urllib.parse.quote(part) for part in path.split("/"))
    return f"{base_url(base)}/datasets/{repo}/resolve/{urllib.parse.quote(revision)}/{quoted}"


def parse_shards(spec: str) -> list[int]:
    """"0", "0-3", "0,2,5-7" -> sorted shard indices (ValueError when malformed)."""
    out: set[int] = set()
    for part in str(spec).split(","):
        part = part.strip()
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise ValueError(f"bad shard list {spec!r}: expected e.g. 0, 0-3 or 0,2,5-7")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ValueError(f"bad shard range {part!r}: the end is before the start")
        out.update(range(lo, hi + 1))
    return sorted(out)


def shard_paths(dataset: str, shards, config: str | None = None,
                of: int | None = None) -> tuple[str, list[str]]:
    """(repo, the repository paths of the shards) of a named dataset."""
    try:
        ds = DATASETS[dataset]
    except KeyError:
        raise FetchError(f"unknown dataset {dataset!r} (choose from "
                         f"{', '.join(DATASETS)})") from None
    if isinstance(shards, str):
        shards = parse_shards(shards)
    if ds.of is not None:
        total = of if of is not None else ds.of
        bad = [i for i in shards if i >= total]
        if bad:
            raise FetchError(f"{dataset}: shard {bad[0]} does not exist (the config "
                             f"{config or ds.config!r} has {total} shards: 0-{total - 1})")
    return ds.repo, [ds.path(i, config, of) for i in shards]


# ----------------------------------------------------------------------------- HTTP

class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None                     # we follow redirects ourselves


_OPENER = urllib.request.build_opener(_NoRedirect)


class _Retry(Exception):
    """A transient failure: try again (resuming)."""


def _sha_header(value: str | None) -> str | None:
    if not value:
        return None
    v = value.strip()
    if v.startswith("W/"):
        v = v[2:]
    v = v.strip('"').lower()
    return v if re.fullmatch(r"[0-9a-f]{64}", v) else None


def _open(url: str, offset: int, timeout: float):
    """GET url from byte `offset`, following up to 10 redirects by hand. Returns
    (response or None for 416, info dict with size / sha256 seen on the way)."""
    info: dict = {"size": None, "sha256": None}
    for _ in range(10):
        req = urllib.request.Request(url, headers={"User-Agent": USER_AGENT,
                                                   "Accept-Encoding": "identity"})
        if offset:
            req.add_header("Range", f"bytes={offset}-")
        try:
            resp = _OPENER.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            headers = e.headers or {}
            _linked(info, headers)
            if e.code in (301, 302, 303, 307, 308) and headers.get("Location"):
                url = urllib.parse.urljoin(url, headers["Location"])
                e.close()
                continue
            e.close()
            if e.code == 416:
                m = re.match(r"bytes \*/(\d+)", headers.get("Content-Range", "") or "")
                if m and info["size"] is None:
                    info["size"] = int(m.group(1))
                return None, info
            if e.code in (408, 429) or e.code >= 500:
                raise _Retry(f"HTTP {e.code} {e.reason}") from None
            raise FetchError(f"{url}: HTTP {e.code} {e.reason}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
            reason = getattr(e, "reason", None) or e
            raise _Retry(f"cannot connect: {reason}") from None
        _linked(info, resp.headers)
        return resp, info
    raise FetchError(f"{url}: too many redirects")


def _linked(info: dict, headers) -> None:
    size = headers.get("X-Linked-Size")
    if size and size.isdigit():
        info["size"] = int(size)
    sha = _sha_header(headers.get("X-Linked-Etag"))
    if sha:
        info["sha256"] = sha


def _hash_file(path: Path, h) -> None:
    with open(path, "rb") as f:
        while True:
            block = f.read(CHUNK)
            if not block:
                return
            h.update(block)


def _attempt(url: str, part: Path, name: str, progress: Progress | None,
             timeout: float) -> dict:
    """One try: resume `part` and read to the end. Returns the info dict; raises _Retry
    on a transient failure (the part is kept), FetchError on a permanent one."""
    offset = part.stat().st_size if part.exists() else 0
    resp, info = _open(url, offset, timeout)
    if resp is None:                                    # 416: nothing left to send
        if info["size"] is not None and offset == info["size"]:
            return info
        part.unlink(missing_ok=True)                    # a bad part: start over
        raise _Retry("the server refused the range; starting over")
    with resp:
        status = resp.status
        total = None
        if status == 206:
            m = re.match(r"bytes (\d+)-(\d+)/(\d+|\*)", resp.headers.get("Content-Range", ""))
            if not m or int(m.group(1)) != offset:
                part.unlink(missing_ok=True)
                raise _Retry("the server sent another range; starting over")
            if m.group(3) != "*":
                total = int(m.group(3))
        elif status == 200:
            offset = 0                                  # no range support: from scratch
            length = resp.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
        else:
            raise FetchError(f"{url}: unexpected HTTP {status}")
        if info["size"] is None:
            info["size"] = total
        elif total is not None and total != info["size"]:
            raise FetchError(f"{name}: the server says {total} bytes, the repository "
                             f"{info['size']} (changed upstream?)")
        done = offset
        with open(part, "r+b" if offset else "wb") as f:
            f.seek(offset)
            f.truncate()
            if progress:
                progress(name, done, info["size"])
            while True:
                try:
                    block = resp.read(CHUNK)
                except (OSError, ValueError, http.client.HTTPException) as e:
                    # IncompleteRead, connection reset, timeout
                    f.flush()
                    raise _Retry(f"connection lost after {done} bytes: "
                                 f"{type(e).__name__}") from None
                if not block:
                    break
                f.write(block)
                done += len(block)
                if progress:
                    progress(name, done, info["size"])
        if info["size"] is not None and done < info["size"]:
            raise _Retry(f"connection closed after {done} of {info['size']} bytes")
    return info


def fetch_file(repo: str, path: str, *, revision: str = "main", base: str | None = None,
               cache=None, retries: int = 5, timeout: float = 60.0,
               progress: Progress | None = None, backoff: float = 1.0) -> Path:
    """Download one file of a dataset repository into the cache (see the module doc);
    returns its local path. A file already in the cache is returned as it is."""
    dest = cache_dir(cache) / repo / path
    if dest.is_file():
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    url = file_url(repo, path, revision, base)
    name = f"{repo}/{path}"
    last = ""
    for attempt in range(max(0, int(retries)) + 1):
        if attempt:
            time.sleep(min(backoff * 2 ** (attempt - 1), 30.0))
        try:
            info = _attempt(url, part, name, progress, timeout)
        except _Retry as e:
            last = str(e)
            continue
        _verify(part, name, info)
        os.replace(part, dest)
        return dest
    kept = f"; {part.stat().st_size} bytes kept in {part} for the next try" \
        if part.exists() else ""
    raise FetchError(f"{name}: download failed after {int(retries) + 1} attempt(s): "
                     f"{last}{kept}")


def _verify(part: Path, name: str, info: dict) -> None:
    size = part.stat().st_size
    if info["size"] is not None and size != info["size"]:
        part.unlink(missing_ok=True)
        raise FetchError(f"{name}: size mismatch: got {size} bytes, expected "
                         f"{info['size']}; the download was deleted")
    if info["sha256"]:
        h = hashlib.sha256()
        _hash_file(part, h)
        got = h.hexdigest()
        if got != info["sha256"]:
            part.unlink(missing_ok=True)
            raise FetchError(f"{name}: sha256 mismatch: got {got}, expected "
                             f"{info['sha256']} (corrupted download); the file was deleted")


def fetch_shards(dataset: str, shards, *, config: str | None = None, of: int | None = None,
                 **kw) -> list[Path]:
    """Download shards of a named dataset (DATASETS) by index; their local paths."""
    repo, paths = shard_paths(dataset, shards, config, of)
    return [fetch_file(repo, p, **kw) for p in paths]
