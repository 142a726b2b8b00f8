"""Helpers shared by the pre-tokenizer twin tests (imported from the tests folder)."""
from __future__ import annotations


def first_difference(got: list[bytes], want: list[bytes], data: bytes) -> str | None:
    """None if equal, else a short description of the first differing chunk."""
    if got == want:
        return None
    k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    offset = sum(len(c) for c in got[:k])
    return (
        f"first difference at chunk {k}, byte {offset}:\n"
        f"  context: {data[max(0, offset - 40):offset + 40]!r}\n"
        f"  twin:    {got[max(0, k - 2):k + 3]!r}\n"
        f"  oracle:  {want[max(0, k - 2):k + 3]!r}"
    )
