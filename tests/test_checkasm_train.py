"""checkasm entries of the training functions (count_words, train): guard
pages, the checked-call trampoline (8 arguments), and the naive twin."""
from harness.dev import checkasm


def _run(pattern: str, n_random: int) -> None:
    lines: list[str] = []
    ok = checkasm.run_checks(seed=2026, pattern=pattern, n_random=n_random, out=lines.append)
    assert ok, "\n".join(lines)


def test_count_words_checkasm():
    _run("asmbpe_count_words", 600)


def test_train_checkasm():
    _run("asmbpe_train", 1000)


def test_train32_checkasm():
    _run("asmbpe_train32", 1000)
