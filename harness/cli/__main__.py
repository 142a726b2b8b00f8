"""`python -m harness.cli`: the `asmbpe` command."""
from . import main

main()
