"""String and list helpers. Each function is self-contained (its source is the skill's code) with a ``tests`` string."""

from __future__ import annotations

from collections.abc import Callable


def _tests(fn: Callable[..., object], tests: str) -> None:
    """Attach the skill's tests as the ``tests`` attribute that plugin functions carry."""
    vars(fn)["tests"] = tests


def reverse_text(text: str) -> str:
    """Reverse a string character by character."""
    return text[::-1]


_tests(
    reverse_text,
    """
assert reverse_text("hello") == "olleh"
assert reverse_text("") == ""
assert reverse_text("ab c") == "c ba"
""",
)


def reverse_words(text: str) -> str:
    """Reverse the order of the words in a text."""
    return " ".join(reversed(text.split()))


_tests(
    reverse_words,
    """
assert reverse_words("one two three") == "three two one"
assert reverse_words("  solo ") == "solo"
""",
)


def word_count(text: str) -> int:
    """Count the words (whitespace-separated) in a text."""
    return len(text.split())


_tests(
    word_count,
    """
assert word_count("the quick brown fox") == 4
assert word_count("") == 0
assert word_count("  spaced   out  ") == 2
""",
)


def sort_words(text: str) -> str:
    """Sort the words of a text alphabetically (case-insensitive)."""
    return " ".join(sorted(text.split(), key=lambda word: (word.casefold(), word)))


_tests(
    sort_words,
    """
assert sort_words("pear Apple banana") == "Apple banana pear"
assert sort_words("b a") == "a b"
""",
)


def dedupe_list(items: list) -> list:
    """Remove duplicates from a list, keeping the first occurrence of each item in order."""
    seen = []
    kept = []
    for item in items:
        if item not in seen:
            seen.append(item)
            kept.append(item)
    return kept


_tests(
    dedupe_list,
    """
assert dedupe_list([3, 1, 3, 2, 1]) == [3, 1, 2]
assert dedupe_list([]) == []
assert dedupe_list(["a", "a", [1], [1]]) == ["a", [1]]
""",
)

SKILLS: list[Callable[..., object]] = [reverse_text, reverse_words, word_count, sort_words, dedupe_list]
