#!/usr/bin/env bash
# Quick start, step 1 of 2 (see README.md): set up asmbpe on a fresh Debian/Ubuntu
# machine and run the main job on the bundled sample.
#
#   1. installs nasm and binutils with apt-get when missing (as root; otherwise it
#      prints the sudo command to run and stops),
#   2. pip-installs this checkout in editable mode with the test extra (which
#      assembles harness/libasmbpe.so through setup.py -> build.py),
#   3. runs python3 build.py (up to date after step 2; the command to rerun
#      after editing asm/),
#   4. runs `asmbpe check`, previews the chunks of datasets/kjv.txt, and trains a
#      tokenizer on it (the main job): datasets/kjv.tokenizer.bin.
#
# PYTHON=/path/to/python bash setup.sh uses another interpreter (>= 3.10).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore    # quiet pip's warning when run as root

# -- system packages ---------------------------------------------------------
missing=()
command -v nasm >/dev/null 2>&1 || missing+=(nasm)
command -v ld >/dev/null 2>&1 || missing+=(binutils)
"$PY" -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
# venv + ensurepip: tests/test_packaging.py builds the wheel in isolated environments
# and installs it into a fresh virtualenv (Debian splits them into python3-venv)
"$PY" -c "import ensurepip, venv" >/dev/null 2>&1 || missing+=(python3-venv)
if ((${#missing[@]})); then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "== apt-get install ${missing[*]}"
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq "${missing[@]}"
    else
        echo "setup.sh: missing ${missing[*]}; install with:" >&2
        echo "    sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi

# -- Python package ----------------------------------------------------------
pip_args=()
# Debian 12's system Python is "externally managed" (PEP 668): outside a virtualenv,
# pip refuses to install unless told to.
if [ -z "${VIRTUAL_ENV:-}" ] && "$PY" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'; then
    echo "note: $PY is externally managed (PEP 668); installing with --break-system-packages" \
         "(activate a virtualenv first to avoid that)"
    pip_args+=(--break-system-packages)
fi
echo "== pip install -e '.[test]'"
"$PY" -m pip install -q ${pip_args[@]+"${pip_args[@]}"} -e '.[test]'

# -- build -------------------------------------------------------------------
echo "== python3 build.py"
"$PY" build.py

# -- the main job on the bundled sample --------------------------------------
if command -v asmbpe >/dev/null 2>&1; then
    ASMBPE=(asmbpe)
else                                    # the console script's directory is not on PATH
    ASMBPE=("$PY" -m harness.cli)
fi
echo "== asmbpe split datasets/kjv.txt | head -c 600"
"${ASMBPE[@]}" split datasets/kjv.txt | head -c 600
echo
echo "== asmbpe check"
"${ASMBPE[@]}" check
echo "== asmbpe train datasets/kjv.txt -o datasets/kjv.tokenizer.bin --vocab-size 8192 --verify"
"${ASMBPE[@]}" train datasets/kjv.txt -o datasets/kjv.tokenizer.bin --vocab-size 8192 --verify
echo "setup.sh: done. Next: python3 -m pytest -q"
