#!/usr/bin/env python3
"""Turn local files into the Parquet layout the harness reads: the same as
`asmbpe data prepare INPUT... -o DIR` (see `--help`), e.g.

    python3 datasets/prepare.py notes/*.txt --separator '' -o prepared/ --shard-mb 512

writes prepared/shard-00000.parquet, ... with a `text` column (or `messages`, --chat).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.cli import main  # noqa: E402

if __name__ == "__main__":
    main(["data", "prepare", *sys.argv[1:]])
