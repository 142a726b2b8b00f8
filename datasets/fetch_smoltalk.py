#!/usr/bin/env python3
"""Download smoltalk shards into the asmbpe cache: the same as
`asmbpe data fetch smoltalk ARGS...` (see `--help`), e.g.

    python3 datasets/fetch_smoltalk.py --shards 0-3

Resumable (HTTP range requests) and checked (size, sha256 from the Hub's
X-Linked-Etag). The hub is $ASMBPE_HF_ENDPOINT or --base-url (default
https://huggingface.co); files go to $ASMBPE_CACHE or --cache-dir (default
~/.cache/asmbpe). Prints the local paths on stdout.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.cli import main  # noqa: E402

if __name__ == "__main__":
    main(["data", "fetch", "smoltalk", *sys.argv[1:]])
