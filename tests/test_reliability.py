"""tools/reliability.py, the README's reliability figures, runs and finds every fault
handled (quick mode: fewer variants, one kill per signal)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_reliability_figures_all_handled():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "reliability.py"), "--quick",
                        "--kills", "1"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    for needle in ("tokenizer.bin v1", "truncated", ".tok v2: a token changed",
                   "killed by SIGKILL", "killed by SIGTERM", "killed by SIGHUP",
                   "identical .tok files", "sharing a Tokenizer"):
        assert any(needle in line for line in lines), needle
