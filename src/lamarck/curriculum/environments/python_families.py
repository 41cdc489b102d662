"""Parametrised task templates for ``python_functions``: per level, families whose constants are drawn at random.

Each family's ``code`` is the reference solution (our own code, run in-process to compute expected values);
``describe`` and ``code`` are ``str.format`` templates over the drawn constants.

Two disjoint pools:

- ``FAMILIES`` (training): what training, the dev slice and the gate draw from. Every family's constants span
  about a thousand programs or more, so reserving the gate's and dev's programs (family and constants, the task's
  key) leaves training almost all of a level and ``heldout`` can protect every level by key. Eight to ten kinds
  per level (arithmetic, conditionals, strings, lists, dicts, loops, recursion, sorting keys, parsing) with
  ``describe`` phrased in several styles: with only a few kinds a level, training memorised them and the report
  slice barely moved.
- ``REPORT_FAMILIES``: one or two kinds of function per level that nothing but the report slice ever draws, so the
  report slice measures transfer to functions of a kind never trained on. They need only enough programs to fill
  the report slice with distinct keys (50 per level).

Constants a family only renames (the order of a set, a symbol) are canonical or fixed, so a task's key does not
count the same program twice.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Args = tuple[Any, ...]
Split = Literal["train", "report"]


@dataclass(frozen=True)
class Family:
    level: int
    name: str
    signature: str
    describe: str
    code: str
    consts: Callable[[random.Random], dict[str, Any]]
    inputs: Callable[[random.Random, dict[str, Any]], list[Args]]


def _ints(rng: random.Random, n: int, low: int, high: int) -> list[Args]:
    return [(rng.randint(low, high),) for _ in range(n)]


def _word(rng: random.Random, low: int = 3, high: int = 8) -> str:
    return "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(low, high)))


def _words(rng: random.Random, low: int, high: int) -> list[str]:
    return [_word(rng, 2, 9) for _ in range(rng.randint(low, high))]


def _lists(rng: random.Random, n: int, low: int, high: int, size: tuple[int, int] = (0, 8)) -> list[Args]:
    return [([rng.randint(low, high) for _ in range(rng.randint(*size))],) for _ in range(n)]


def _with_char(rng: random.Random, ch: str, high: int = 20) -> str:
    """A string over ``ch`` and four other letters, so a character-counting test has something to count."""
    pool = ch + "".join(rng.sample([c for c in string.ascii_lowercase if c != ch], 4))
    return "".join(rng.choice(pool) for _ in range(rng.randint(0, high)))


# Separators: no quotes, backslash or backtick (they would read badly inside a repr), no digits or 'a'-'c'.
_MARKS = list(":=*#/|^@_~-+;,.!?%&<>")
_SEPS = ["", *_MARKS, *"defghijklmnopqrstuvwxyz"]
_JOINS = [*_SEPS, " ", ", "]
_SPACES = ["", *_MARKS, *string.digits, "__", "--", ".."]
_JOINERS = ["", " ", "-", ",", ", ", "|", "/", ":", ";", "+", "*", "_", "~", ".", "!", "#", "=", "&", "@", "^"]
_VOCAB = ("ant", "bee", "cat", "dog", "eel", "fox", "gnu", "hen", "owl", "pig", "rat", "yak")


FAMILIES: tuple[Family, ...] = (
    # level 1: one-liners
    Family(1, "add_constant", "add_constant(x: int) -> int", "Return x plus {k}.",
           "def add_constant(x):\n    return x + {k}\n",
           lambda r: {"k": r.randint(2, 999)}, lambda r, c: _ints(r, 6, -500, 500)),
    Family(1, "scale", "scale(x: int) -> int", "Return x multiplied by {k}.",
           "def scale(x):\n    return x * {k}\n",
           lambda r: {"k": r.randint(2, 999)}, lambda r, c: _ints(r, 6, -200, 200)),
    Family(1, "add_and_shift", "add_and_shift(a: int, b: int) -> int", "Return the sum of a and b, minus {k}.",
           "def add_and_shift(a, b):\n    return a + b - {k}\n",
           lambda r: {"k": r.randint(1, 1999)},
           lambda r, c: [(r.randint(-300, 300), r.randint(-300, 300)) for _ in range(6)]),
    Family(1, "reverse_suffix", "reverse_suffix(s: str) -> str",
           "Return the string s reversed, followed by the text {suffix!r}.",
           "def reverse_suffix(s):\n    return s[::-1] + {suffix!r}\n",
           lambda r: {"suffix": _word(r, 1, 4)}, lambda r, c: [(_word(r, 0, 10),) for _ in range(6)]),
    Family(1, "is_multiple", "is_multiple(x: int) -> bool", "Return True if x is divisible by {k}, otherwise False.",
           "def is_multiple(x):\n    return x % {k} == 0\n",
           lambda r: {"k": r.randint(2, 999)},
           lambda r, c: [(c["k"] * r.randint(-20, 20),) for _ in range(3)] + _ints(r, 3, -3000, 3000)),
    Family(1, "subtract_from", "subtract_from(x: int) -> int", "Given an integer x, return {k} minus x.",
           "def subtract_from(x):\n    return {k} - x\n",
           lambda r: {"k": r.randint(1, 1999)}, lambda r, c: _ints(r, 5, -500, 500) + [(0,)]),
    Family(1, "floor_divide", "floor_divide(x: int) -> int",
           "Divide x by {k} and round down to a whole number, the way Python's // operator does (so -1 gives -1).",
           "def floor_divide(x):\n    return x // {k}\n",
           lambda r: {"k": r.randint(2, 999)},
           lambda r, c: _ints(r, 3, 0, 20 * c["k"]) + [(c["k"] - 1,), (c["k"],), (-1,), (-c["k"] - 1,)]),
    Family(1, "wrap_text", "wrap_text(s: str) -> str", "Put {left!r} in front of s and {right!r} after it.",
           "def wrap_text(s):\n    return {left!r} + s + {right!r}\n",
           lambda r: {"left": _word(r, 1, 3), "right": r.choice(_MARKS) + _word(r, 0, 2)},
           lambda r, c: [(_word(r, 1, 8),) for _ in range(5)] + [("",)]),
    Family(1, "first_or_default", "first_or_default(xs: list[int]) -> int",
           "The function takes a list xs and gives back its first element; when xs is empty it gives back {d} instead.",
           "def first_or_default(xs):\n    return xs[0] if xs else {d}\n",
           lambda r: {"d": r.randint(-999, 999)}, lambda r, c: _lists(r, 4, -99, 99, (1, 6)) + [([],), ([c["d"] + 1],)]),
    Family(1, "square_plus", "square_plus(x: int) -> int",
           "Compute x times x and add {k} to it. For instance, 3 would give {example}.",
           "def square_plus(x):\n    return x * x + {k}\n",
           lambda r: {"k": (k := r.randint(1, 999)), "example": 9 + k}, lambda r, c: _ints(r, 5, -60, 60) + [(0,)]),
    # level 2: builtins and simple conditions
    Family(2, "clamp", "clamp(x: int) -> int", "Return x limited to the range {lo}..{hi}: below {lo} give {lo}, above {hi} give {hi}.",
           "def clamp(x):\n    return min(max(x, {lo}), {hi})\n",
           lambda r: {"lo": (lo := r.randint(-50, 50)), "hi": lo + r.randint(1, 100)},
           lambda r, c: [(c["lo"] - 1,), (c["hi"] + 1,), (c["lo"],)] + _ints(r, 4, c["lo"] - 60, c["hi"] + 60)),
    Family(2, "distance_to", "distance_to(x: int) -> int", "Return the distance between x and {k} (never negative).",
           "def distance_to(x):\n    return abs(x - {k})\n",
           lambda r: {"k": r.randint(-999, 999)},
           lambda r, c: [(c["k"],), (c["k"] - 7,)] + _ints(r, 4, c["k"] - 500, c["k"] + 500)),
    Family(2, "larger_minus", "larger_minus(a: int, b: int) -> int", "Return the larger of a and b, minus {k}.",
           "def larger_minus(a, b):\n    return max(a, b) - {k}\n",
           lambda r: {"k": r.randint(1, 1999)},
           lambda r, c: [(r.randint(-99, 99), r.randint(-99, 99)) for _ in range(6)]),
    Family(2, "has_prefix", "has_prefix(s: str) -> bool", "Return True if s starts with {p!r} or ends with {q!r}.",
           "def has_prefix(s):\n    return s.startswith({p!r}) or s.endswith({q!r})\n",
           lambda r: {"p": _word(r, 1, 3), "q": _word(r, 1, 2)},
           lambda r, c: [(c["p"] + _word(r, 0, 5),), (_word(r, 0, 5) + c["q"],)] + [(_word(r, 1, 8),) for _ in range(4)]),
    Family(2, "spread", "spread(xs: list[int]) -> int",
           "Given a list of integers xs, return the largest value minus the smallest value, plus {k}. If xs is "
           "empty, return {d}.",
           "def spread(xs):\n    if not xs:\n        return {d}\n    return max(xs) - min(xs) + {k}\n",
           lambda r: {"k": r.randint(0, 99), "d": r.randint(-99, 99)},
           lambda r, c: _lists(r, 4, -99, 99, (1, 7)) + [([],), ([7],)]),
    Family(2, "slice_middle", "slice_middle(s: str) -> str",
           "Return the piece of s that starts at index {a} and stops just before index {b} (indices count from 0); "
           "when s is too short, return whatever part of that range exists, possibly ''.",
           "def slice_middle(s):\n    return s[{a}:{b}]\n",
           lambda r: {"a": (a := r.randint(0, 30)), "b": a + r.randint(1, 40)},
           lambda r, c: [(_word(r, c["b"], c["b"] + 5),), (_word(r, c["a"], c["b"]),), (_word(r, 0, c["a"]),), ("",),
                         (_word(r, c["a"] + 1, c["b"] + 9),), (_word(r, c["b"] + 1, c["b"] + 9),)]),
    Family(2, "lookup_or_default", "lookup_or_default(key: str) -> int",
           "Look key up in the table {table}. Return the number stored for key, or {d} if key is not in the table.",
           "def lookup_or_default(key):\n    return {table}.get(key, {d})\n",
           lambda r: {"table": _table(r, 2, 4, -99, 99), "d": r.randint(-99, 99)},
           lambda r, c: [(k,) for k in c["table"]] + [(r.choice(_VOCAB),), (_word(r, 1, 5),), ("",)]),
    Family(2, "parity_shift", "parity_shift(x: int) -> int", "If x is even, return x + {a}. If x is odd, return x - {b}.",
           "def parity_shift(x):\n    return x + {a} if x % 2 == 0 else x - {b}\n",
           lambda r: {"a": r.randint(1, 99), "b": r.randint(1, 99)},
           lambda r, c: [(r.randint(-99, 99),), (0,), (-3,), (7,)] + _ints(r, 3, -500, 500)),
    # level 3: loops
    Family(3, "sum_multiples", "sum_multiples(n: int) -> int",
           "Return the sum of all integers from {a} to n (inclusive) that are divisible by {k} (0 if there are none).",
           "def sum_multiples(n):\n    return sum(i for i in range({a}, n + 1) if i % {k} == 0)\n",
           lambda r: {"a": r.randint(1, 50), "k": r.randint(2, 40)},
           lambda r, c: [(0,), (c["a"],)] + _ints(r, 5, 1, c["a"] + 400)),
    Family(3, "count_in_set", "count_in_set(s: str) -> int",
           "Return how many characters of s are one of the letters in {letters!r}.",
           "def count_in_set(s):\n    return sum(1 for ch in s if ch in {letters!r})\n",
           lambda r: {"letters": "".join(r.sample(string.ascii_lowercase, r.randint(2, 6)))},
           lambda r, c: [("",)] + [(_word(r, 1, 25),) for _ in range(5)]),
    Family(3, "long_words", "long_words(words: list[str]) -> list[str]",
           "Return the words longer than {k} characters, each followed by {suffix!r}, in their original order.",
           "def long_words(words):\n    return [w + {suffix!r} for w in words if len(w) > {k}]\n",
           lambda r: {"k": r.randint(1, 7), "suffix": _word(r, 1, 3)}, lambda r, c: [(_words(r, 0, 8),) for _ in range(6)]),
    Family(3, "digit_power_sum", "digit_power_sum(n: int) -> int",
           "Return the sum of the decimal digits of n (n >= 0), each raised to the power {p}, modulo {m}.",
           "def digit_power_sum(n):\n    return sum(int(d) ** {p} for d in str(n)) % {m}\n",
           lambda r: {"p": (p := r.randint(1, 4)), "m": r.randint(2, (50, 400, 999, 999)[p - 1])},
           lambda r, c: [(0,)] + _ints(r, 5, 1, 10**6)),
    Family(3, "product_mod", "product_mod(xs: list[int]) -> int",
           "Return the product of all numbers in xs modulo {m} (the product of an empty list is 1).",
           "def product_mod(xs):\n    p = 1\n    for x in xs:\n        p = p * x % {m}\n    return p % {m}\n",
           lambda r: {"m": r.randint(7, 9999)}, lambda r, c: [([],)] + _lists(r, 5, 1, 99)),
    Family(3, "join_shifted", "join_shifted(xs: list[int]) -> str",
           "Add {k} to every number in xs, write each result in decimal, and join them with {sep!r} between "
           "neighbours (an empty list gives '').",
           "def join_shifted(xs):\n    return {sep!r}.join(str(x + {k}) for x in xs)\n",
           lambda r: {"k": r.randint(1, 99), "sep": r.choice(_JOINERS)},
           lambda r, c: _lists(r, 5, -50, 50, (1, 6)) + [([],)]),
    Family(3, "mask_letters", "mask_letters(s: str) -> str",
           "Go through s character by character: each character that is one of the letters in {letters!r} becomes "
           "{mark!r}, every other character stays as it is. Return the new string.",
           "def mask_letters(s):\n    return ''.join({mark!r} if ch in {letters!r} else ch for ch in s)\n",
           lambda r: {"letters": "".join(sorted(r.sample(string.ascii_lowercase, r.randint(2, 5)))),
                      "mark": r.choice(_MARKS)},
           lambda r, c: [(_with_char(r, r.choice(c["letters"])),) for _ in range(5)] + [("",)]),
    Family(3, "powers_mod", "powers_mod(n: int) -> list[int]",
           "Return the first n powers of {b}, starting with {b} ** 0 = 1, each taken modulo {m}; n = 0 gives an "
           "empty list.",
           "def powers_mod(n):\n    out = []\n    p = 1\n    for _ in range(n):\n        out.append(p % {m})\n"
           "        p = p * {b}\n    return out\n",
           lambda r: {"b": r.randint(2, 20), "m": r.randint(7, 999)},
           lambda r, c: _ints(r, 4, 2, 14) + [(0,), (1,)]),
    Family(3, "basket_total", "basket_total(items: list[str]) -> int",
           "The prices are {prices}. Given a list of item names, return what all the items cost together; an item "
           "that has no price in that table costs {d}.",
           "def basket_total(items):\n    prices = {prices}\n    return sum(prices.get(item, {d}) for item in items)\n",
           lambda r: {"prices": _table(r, 3, 5, 1, 50), "d": r.randint(0, 20)},
           lambda r, c: [([r.choice(_VOCAB) for _ in range(r.randint(1, 6))],) for _ in range(5)] + [([],)]),
    # level 4: several cases
    Family(4, "fizz_word", "fizz_word(n: int) -> str",
           "Return {w1!r} if n is divisible by {a}, {w2!r} if divisible by {b}, {both!r} if divisible by both, "
           "otherwise n as a string.",
           "def fizz_word(n):\n    if n % {a} == 0 and n % {b} == 0:\n        return {both!r}\n    if n % {a} == 0:\n"
           "        return {w1!r}\n    if n % {b} == 0:\n        return {w2!r}\n    return str(n)\n",
           lambda r: {"a": (a := r.randint(2, 7)), "b": r.choice([x for x in range(2, 12) if x % a and a % x]),
                      "w1": _word(r, 3, 5), "w2": _word(r, 3, 5), "both": _word(r, 6, 9)},
           lambda r, c: [(c["a"] * c["b"],), (c["a"],), (c["b"],)] + _ints(r, 4, 1, 200)),
    Family(4, "grade", "grade(score: int) -> str",
           "Return 'A' for a score of at least {t1}, 'B' for at least {t2}, 'C' for at least {t3}, otherwise 'F'.",
           "def grade(score):\n    if score >= {t1}:\n        return 'A'\n    if score >= {t2}:\n        return 'B'\n"
           "    if score >= {t3}:\n        return 'C'\n    return 'F'\n",
           lambda r: {"t1": (t1 := r.randint(80, 95)), "t2": (t2 := t1 - r.randint(5, 15)), "t3": t2 - r.randint(5, 20)},
           lambda r, c: [(c["t1"],), (c["t2"] - 1,), (c["t3"],)] + _ints(r, 4, 0, 100)),
    Family(4, "classify", "classify(x: int) -> str",
           "Return 'negative' if x < 0, 'zero' if x == 0, 'small' if 0 < x < {k}, and 'large' otherwise.",
           "def classify(x):\n    if x < 0:\n        return 'negative'\n    if x == 0:\n        return 'zero'\n"
           "    return 'small' if x < {k} else 'large'\n",
           lambda r: {"k": r.randint(5, 2000)},
           lambda r, c: [(0,), (c["k"],), (c["k"] - 1,), (-3,)] + _ints(r, 3, -2 * c["k"], 2 * c["k"])),
    Family(4, "shipping_cost", "shipping_cost(weight: int) -> int",
           "Shipping costs {base} for a weight up to {w1}, plus {extra} for every unit above {w1}; weights above {w2} "
           "cannot ship and cost -1. Return the cost.",
           "def shipping_cost(weight):\n    if weight > {w2}:\n        return -1\n    if weight <= {w1}:\n"
           "        return {base}\n    return {base} + (weight - {w1}) * {extra}\n",
           lambda r: {"base": r.randint(3, 20), "w1": (w1 := r.randint(2, 10)), "extra": r.randint(1, 9),
                      "w2": w1 + r.randint(5, 40)},
           lambda r, c: [(c["w1"],), (c["w2"],), (c["w2"] + 1,)] + _ints(r, 4, 0, c["w2"] + 5)),
    Family(4, "first_word", "first_word(a: str, b: str) -> str",
           "Return {empty!r} if a or b is empty. Otherwise, if a and b are the same word ignoring case, return "
           "{same!r}. Otherwise return whichever of a and b comes first in alphabetical order once both are "
           "lower-cased, followed by {mark!r}.",
           "def first_word(a, b):\n    if not a or not b:\n        return {empty!r}\n    if a.lower() == b.lower():\n"
           "        return {same!r}\n    return (a if a.lower() < b.lower() else b) + {mark!r}\n",
           lambda r: {"empty": (words := _labels(r, 2))[0], "same": words[1], "mark": r.choice(_MARKS)},
           lambda r, c: [(_word(r), _word(r)), ("", _word(r)), ((w := _word(r)), w.upper()), (_word(r), ""),
                         ((w := _word(r)), w + _word(r, 1, 2))] + [(_word(r), _word(r)) for _ in range(2)]),
    Family(4, "triangle_kind", "triangle_kind(a: int, b: int, c: int) -> str",
           "a, b and c are side lengths. Return {bad!r} if they cannot form a triangle (a side is not positive, or "
           "one side is at least as long as the other two together), {eq!r} if all three sides are equal, {iso!r} "
           "if exactly two are equal, and {sc!r} otherwise.",
           "def triangle_kind(a, b, c):\n    if min(a, b, c) <= 0 or a + b <= c or a + c <= b or b + c <= a:\n"
           "        return {bad!r}\n    if a == b == c:\n        return {eq!r}\n    if a == b or b == c or a == c:\n"
           "        return {iso!r}\n    return {sc!r}\n",
           lambda r: dict(zip(("bad", "eq", "iso", "sc"), _labels(r, 4), strict=True)),
           lambda r, c: [(3, 4, 5), ((s := r.randint(1, 20)), s, s), (2, 2, 3), (5, 2, 2), (1, 2, 3), (0, 4, 4),
                         (r.randint(1, 9), r.randint(1, 9), r.randint(1, 9))]),
    Family(4, "apply_command", "apply_command(pos: int, cmd: str) -> int",
           "A counter is at pos. The command 'up' adds {u} to it, 'down' subtracts {d}, 'double' multiplies it by 2 "
           "and 'reset' sets it to {z}; any other command leaves it unchanged. Return the counter after cmd.",
           "def apply_command(pos, cmd):\n    if cmd == 'up':\n        return pos + {u}\n    if cmd == 'down':\n"
           "        return pos - {d}\n    if cmd == 'double':\n        return pos * 2\n    if cmd == 'reset':\n"
           "        return {z}\n    return pos\n",
           lambda r: {"u": r.randint(1, 50), "d": r.randint(1, 50), "z": r.randint(-99, 99)},
           lambda r, c: [(r.randint(-50, 50), cmd) for cmd in ("up", "down", "double", "reset", "jump", "UP")]),
    Family(4, "quadrant", "quadrant(x: int, y: int) -> int",
           "Take ({cx}, {cy}) as the centre. Return 1 if the point (x, y) is right of and above it (x > {cx} and "
           "y > {cy}), 2 if left and above, 3 if left and below, 4 if right and below, and 0 if x == {cx} or "
           "y == {cy}.",
           "def quadrant(x, y):\n    if x == {cx} or y == {cy}:\n        return 0\n    if y > {cy}:\n"
           "        return 1 if x > {cx} else 2\n    return 4 if x > {cx} else 3\n",
           lambda r: {"cx": r.randint(-50, 50), "cy": r.randint(-50, 50)},
           lambda r, c: [(c["cx"] + dx * r.randint(1, 9), c["cy"] + dy * r.randint(1, 9)) for dx, dy in
                         ((1, 1), (-1, 1), (-1, -1), (1, -1), (0, 1), (1, 0))]),
    # level 5: small algorithms
    Family(5, "fib_mod", "fib_mod(n: int) -> int",
           "Return the n-th Fibonacci number modulo {m}, where fib(0) = 0 and fib(1) = 1.",
           "def fib_mod(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, (a + b) % {m}\n    return a % {m}\n",
           lambda r: {"m": r.randint(10, 10**6)}, lambda r, c: [(0,), (1,)] + _ints(r, 4, 2, 500)),
    Family(5, "run_length", "run_length(s: str) -> str",
           "Run-length encode s: each run of a repeated character becomes {form}, runs joined by {join!r}. "
           "For example 'aab' gives {example!r}.",
           "def run_length(s):\n    out = []\n    i = 0\n    while i < len(s):\n        j = i\n"
           "        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out.append({piece})\n"
           "        i = j\n    return {join!r}.join(out)\n",
           lambda r: _run_length_consts(r),
           lambda r, c: [("",)] + [("".join(r.choice("abc") * r.randint(1, 4) for _ in range(r.randint(1, 6))),) for _ in range(5)]),
    Family(5, "window_sums", "window_sums(xs: list[int]) -> list[int]",
           "Return the sums of every window of {k} consecutive elements of xs, in order, keeping only the sums "
           "greater than {t} (empty if xs is shorter than {k}).",
           "def window_sums(xs):\n    sums = [sum(xs[i:i + {k}]) for i in range(len(xs) - {k} + 1)]\n"
           "    return [s for s in sums if s > {t}]\n",
           lambda r: {"k": r.randint(2, 8), "t": r.randint(-100, 100)},
           lambda r, c: [([],)] + _lists(r, 5, -50, 50, (c["k"] - 1, c["k"] + 6))),
    Family(5, "steps_below", "steps_below(n: int) -> int",
           "Starting from n, repeatedly replace n by n // 2 if n is even, or by n * 3 + 1 if n is odd; return how many "
           "replacements happen before n is below {k} (0 if it already is).",
           "def steps_below(n):\n    steps = 0\n    while n >= {k}:\n        n = n // 2 if n % 2 == 0 else n * 3 + 1\n"
           "        steps += 1\n    return steps\n",
           lambda r: {"k": r.randint(2, 999)},
           lambda r, c: [(1,), (c["k"] - 1,), (c["k"],)] + _ints(r, 4, 1, 3 * c["k"] + 100)),
    Family(5, "first_per_remainder", "first_per_remainder(xs: list[int]) -> list[int]",
           "Given a list of integers xs, walk through it in order and keep a number only if no earlier kept number "
           "has the same remainder when divided by {m}. Return the kept numbers in their original order.",
           "def first_per_remainder(xs):\n    seen = set()\n    out = []\n    for x in xs:\n"
           "        if x % {m} not in seen:\n            seen.add(x % {m})\n            out.append(x)\n    return out\n",
           lambda r: {"m": r.randint(2, 999)},
           lambda r, c: [(_same_remainders(r, c["m"]),) for _ in range(5)] + [([],)]),
    Family(5, "palindrome_without", "palindrome_without(s: str) -> bool",
           "Remove from s every character that is one of {drop!r} and ignore the difference between upper and lower "
           "case. Return True if what is left reads the same forwards and backwards (nothing left counts as a "
           "palindrome), otherwise False.",
           "def palindrome_without(s):\n    t = ''.join(ch for ch in s.lower() if ch not in {drop!r})\n"
           "    return t == t[::-1]\n",
           lambda r: {"drop": "".join(sorted(r.sample([*_MARKS, " "], r.randint(1, 3))))},
           lambda r, c: [(_palindrome(r, c["drop"], r.random() < 0.6),) for _ in range(6)] + [("",)]),
    Family(5, "sort_by_remainder", "sort_by_remainder(xs: list[int]) -> list[int]",
           "Sort xs by each number's remainder after division by {m} (Python's %, never negative), smallest "
           "remainder first; numbers with the same remainder go in increasing order. Return the sorted list.",
           "def sort_by_remainder(xs):\n    return sorted(xs, key=lambda x: (x % {m}, x))\n",
           lambda r: {"m": r.randint(2, 999)},
           lambda r, c: [(_same_remainders(r, c["m"]),) for _ in range(5)] + [([],)]),
    Family(5, "rotate_right", "rotate_right(xs: list[int]) -> list[int]",
           "Rotate xs to the right by {k} places: every element moves {k} positions later, and elements that fall "
           "off the end come back in at the front. The rotation can go round the list more than once; an empty "
           "list stays empty.",
           "def rotate_right(xs):\n    if not xs:\n        return []\n    k = {k} % len(xs)\n"
           "    return xs[len(xs) - k:] + xs[:len(xs) - k]\n",
           lambda r: {"k": r.randint(1, 999)},
           lambda r, c: _lists(r, 5, -9, 99, (1, 9)) + [([],), (list(range(1, c["k"] % 7 + 2)),)]),
    Family(5, "pair_sum_count", "pair_sum_count(xs: list[int]) -> int",
           "How many pairs of positions i < j are there in xs with xs[i] + xs[j] == {t}? Return that number.",
           "def pair_sum_count(xs):\n    return sum(1 for i in range(len(xs)) for j in range(i + 1, len(xs))\n"
           "               if xs[i] + xs[j] == {t})\n",
           lambda r: {"t": r.randint(-999, 999)},
           lambda r, c: _lists(r, 5, c["t"] // 2 - 3, c["t"] - c["t"] // 2 + 3, (2, 9)) + [([],), ([c["t"]],)]),
    # level 6: compositions of earlier functions
    Family(6, "power_sum", "power_sum(xs: list[int]) -> int",
           "Return the sum of the {power} of the numbers in xs that are divisible by {m} and greater than {k}.",
           "def power_sum(xs):\n    return sum(x ** {p} for x in xs if x % {m} == 0 and x > {k})\n",
           lambda r: {"p": (p := r.randint(2, 3)), "power": ("squares", "cubes")[p - 2], "m": r.randint(2, 7),
                      "k": r.randint(-50, 50)},
           lambda r, c: [([],)] + [([r.choice((c["m"] * r.randint(-9, 9), r.randint(-60, 60))) for _ in range(r.randint(1, 8))],)
                                   for _ in range(5)]),
    Family(6, "shift_reverse", "shift_reverse(s: str) -> str",
           "Shift every lower-case letter of s {k} places forward in the alphabet (wrapping z to a), replace every "
           "space by {sp!r}, leave other characters unchanged, then return the result reversed.",
           "def shift_reverse(s):\n    out = ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else {sp!r} if c == ' ' else c\n"
           "                  for c in s)\n    return out[::-1]\n",
           lambda r: {"k": r.randint(1, 25), "sp": r.choice(_SPACES)},
           lambda r, c: [(" ".join(_words(r, 0, 3)),) for _ in range(6)]),
    Family(6, "count_primes_between", "count_primes_between(xs: list[int]) -> int",
           "Return how many numbers in xs are prime and lie between {lo} and {hi} (both inclusive).",
           "def count_primes_between(xs):\n    def is_prime(n):\n        if n < 2:\n            return False\n"
           "        i = 2\n        while i * i <= n:\n            if n % i == 0:\n                return False\n"
           "            i += 1\n        return True\n    return sum(1 for x in xs if {lo} <= x <= {hi} and is_prime(x))\n",
           lambda r: {"lo": (lo := r.randint(0, 60)), "hi": lo + r.randint(5, 150)},
           lambda r, c: [([],)] + _lists(r, 5, c["lo"] - 10, c["hi"] + 10, (1, 12))),
    Family(6, "product_digit_sum", "product_digit_sum(xs: list[int]) -> int",
           "Multiply together the numbers in xs that are not divisible by {d} (an empty product is 1), take the "
           "absolute value, and return the sum of its decimal digits plus {k}.",
           "def product_digit_sum(xs):\n    p = 1\n    for x in xs:\n        if x % {d} != 0:\n            p *= x\n"
           "    return sum(int(d) for d in str(abs(p))) + {k}\n",
           lambda r: {"d": r.randint(2, 9), "k": r.randint(0, 200)}, lambda r, c: [([],)] + _lists(r, 5, -30, 30, (1, 7))),
    Family(6, "parse_assignments", "parse_assignments(text: str) -> dict[str, int]",
           "text holds entries separated by {sep!r}, each written name=value with an integer value, as in "
           "{example!r}. Return a dict mapping each name to its value times {k}. Skip entries without an '=' sign; "
           "when a name appears twice the later value wins.",
           "def parse_assignments(text):\n    out = {{}}\n    for entry in text.split({sep!r}):\n"
           "        if '=' in entry:\n            name, value = entry.split('=', 1)\n"
           "            out[name] = int(value) * {k}\n    return out\n",
           lambda r: {"sep": (sep := r.choice(_ENTRY_SEPS)), "k": r.randint(2, 200), "example": f"a=1{sep}b=-2"},
           lambda r, c: [(_assignments(r, c["sep"]),) for _ in range(6)] + [("",)]),
    Family(6, "ranked_names", "ranked_names(scores: dict[str, int]) -> list[str]",
           "scores maps names to points. Return the names that have at least {k} points, the most points first and "
           "names with equal points in alphabetical order, keeping no more than the first {top}.",
           "def ranked_names(scores):\n    names = [n for n in scores if scores[n] >= {k}]\n"
           "    return sorted(names, key=lambda n: (-scores[n], n))[:{top}]\n",
           lambda r: {"k": r.randint(-20, 80), "top": r.randint(1, 10)},
           lambda r, c: [({w: r.randint(c["k"] - 3, c["k"] + 6) for w in r.sample(_VOCAB, r.randint(1, 8))},)
                         for _ in range(6)] + [({},)]),
    Family(6, "sum_number_tokens", "sum_number_tokens(text: str) -> int",
           "Split text on spaces. Some tokens are whole numbers (only digits, possibly after one leading '-'); the "
           "others are words and are ignored. Return the sum of the numbers greater than {k}, multiplied by {m}.",
           "def sum_number_tokens(text):\n    total = 0\n    for tok in text.split():\n"
           "        digits = tok[1:] if tok.startswith('-') else tok\n        if digits.isdigit() and int(tok) > {k}:\n"
           "            total += int(tok)\n    return total * {m}\n",
           lambda r: {"k": r.randint(-50, 50), "m": r.randint(1, 20)},
           lambda r, c: [(_number_tokens(r, c["k"]),) for _ in range(6)] + [("",)]),
    Family(6, "bucket_counts", "bucket_counts(xs: list[int]) -> dict[int, int]",
           "Put every number x of xs into the bucket x // {w} * {w} (the multiple of {w} at or below x). Return a dict "
           "from each bucket to how many numbers fell into it, leaving out buckets with fewer than {c} numbers.",
           "def bucket_counts(xs):\n    counts = {{}}\n    for x in xs:\n        b = x // {w} * {w}\n"
           "        counts[b] = counts.get(b, 0) + 1\n    return {{b: n for b, n in counts.items() if n >= {c}}}\n",
           lambda r: {"w": r.randint(2, 999), "c": r.randint(1, 3)},
           lambda r, c: _lists(r, 5, -2 * c["w"], 2 * c["w"], (1, 10)) + [([],)]),
    # level 7: classic problems
    Family(7, "to_base", "to_base(n: int) -> str",
           "Return the non-negative integer n written in base {b}, using the characters of {digits!r} as the digits "
           "0 to {top} in that order (no prefix; 0 gives {zero!r}).",
           "def to_base(n):\n    if n == 0:\n        return {zero!r}\n    digits = []\n    while n:\n"
           "        digits.append({digits!r}[n % {b}])\n        n //= {b}\n    return ''.join(reversed(digits))\n",
           lambda r: _base_consts(r), lambda r, c: [(0,), (c["b"],)] + _ints(r, 5, 1, 10**5)),
    Family(7, "merge_close", "merge_close(intervals: list[list[int]]) -> list[list[int]]",
           "Given intervals [start, end] (start <= end), merge every two intervals whose gap is at most {g} "
           "(overlapping ones included), leave out merged intervals shorter than {m} (end - start), and return the "
           "rest sorted by start.",
           "def merge_close(intervals):\n    out = []\n    for s, e in sorted(intervals):\n"
           "        if out and s - out[-1][1] <= {g}:\n            out[-1][1] = max(out[-1][1], e)\n"
           "        else:\n            out.append([s, e])\n    return [iv for iv in out if iv[1] - iv[0] >= {m}]\n",
           lambda r: {"g": r.randint(0, 19), "m": r.randint(0, 49)},
           lambda r, c: [([],)] + [([[s, s + r.randint(0, 25)] for s in (r.randint(0, 200) for _ in range(r.randint(1, 8)))],)
                                   for _ in range(5)]),
    Family(7, "top_words", "top_words(text: str) -> list[str]",
           "Return the {k} most frequent words of text (split on spaces, lower-cased), leaving out the words {stop}, "
           "most frequent first, ties in alphabetical order; fewer if there are fewer such words.",
           "def top_words(text):\n    counts = {{}}\n    for w in text.lower().split():\n        if w not in {stop}:\n"
           "            counts[w] = counts.get(w, 0) + 1\n    return sorted(counts, key=lambda w: (-counts[w], w))[:{k}]\n",
           lambda r: {"k": r.randint(1, 6), "stop": sorted(r.sample(_VOCAB, r.randint(2, 3)))},
           lambda r, c: [("",)] + [(" ".join(r.choice(_VOCAB).capitalize() if r.random() < 0.2 else r.choice(_VOCAB)
                                             for _ in range(r.randint(1, 16))),) for _ in range(5)]),
    Family(7, "coprime_count", "coprime_count(n: int) -> int",
           "Return how many integers from 1 to n (inclusive) share no common divisor greater than 1 with {m}.",
           "def coprime_count(n):\n    def gcd(a, b):\n        while b:\n            a, b = b, a % b\n        return a\n"
           "    return sum(1 for i in range(1, n + 1) if gcd(i, {m}) == 1)\n",
           lambda r: {"m": r.randint(2, 3000)}, lambda r, c: [(0,), (1,)] + _ints(r, 5, 2, 600)),
    Family(7, "depth_sum", "depth_sum(data: list) -> int",
           "data is a list whose items are integers or lists built the same way, nested to any depth. Add up the "
           "integers at depth {k} or less (the items of data itself are at depth 1, the items of a list inside it "
           "at depth 2, and so on) and return that total plus {c}.",
           "def depth_sum(data):\n    def walk(items, depth):\n        total = 0\n        for item in items:\n"
           "            if isinstance(item, list):\n                total += walk(item, depth + 1)\n"
           "            elif depth <= {k}:\n                total += item\n        return total\n"
           "    return walk(data, 1) + {c}\n",
           lambda r: {"k": r.randint(1, 4), "c": r.randint(0, 999)},
           lambda r, c: [(_nested(r, 0),) for _ in range(6)] + [([],)]),
    Family(7, "roman_value", "roman_value(s: str) -> int",
           "s is a Roman numeral made of I=1, V=5, X=10, L=50, C=100, D=500 and M=1000, where a symbol written "
           "before a larger one is subtracted (IV is 4, XC is 90, MCMXC is 1990). Return its value minus {k}.",
           "def roman_value(s):\n    values = {{'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}}\n"
           "    total = 0\n    for i, ch in enumerate(s):\n"
           "        if i + 1 < len(s) and values[ch] < values[s[i + 1]]:\n            total -= values[ch]\n"
           "        else:\n            total += values[ch]\n    return total - {k}\n",
           lambda r: {"k": r.randint(0, 999)},
           lambda r, c: [(_roman(r.randint(1, 3999)),) for _ in range(5)] + [(_roman(r.choice((4, 9, 14, 40, 90, 400))),)]),
    Family(7, "pascal_row_mod", "pascal_row_mod(n: int) -> list[int]",
           "Row 0 of Pascal's triangle is [1]; every later row starts and ends with 1, and each entry in between is "
           "the sum of the two entries above it. Return row n (n >= 0) with every entry taken modulo {m}.",
           "def pascal_row_mod(n):\n    row = [1]\n    for _ in range(n):\n"
           "        row = [1] + [row[i] + row[i + 1] for i in range(len(row) - 1)] + [1]\n"
           "    return [x % {m} for x in row]\n",
           lambda r: {"m": r.randint(2, 1500)},
           lambda r, c: _ints(r, 4, 2, 24) + [(0,), (1,)]),
    Family(7, "wrap_lines", "wrap_lines(text: str) -> list[str]",
           "Split text into words on whitespace and fill lines greedily: keep adding the next word, after one space, "
           "while the line stays at most {w} characters long; a word longer than {w} gets a line of its own. Return "
           "the lines in order, each with {bullet!r} put in front (empty text gives []).",
           "def wrap_lines(text):\n    lines = []\n    line = ''\n    for word in text.split():\n"
           "        if line and len(line) + 1 + len(word) <= {w}:\n            line += ' ' + word\n"
           "        else:\n            if line:\n                lines.append(line)\n            line = word\n"
           "    if line:\n        lines.append(line)\n    return [{bullet!r} + line for line in lines]\n",
           lambda r: {"w": r.randint(4, 40), "bullet": r.choice(_SPACES)},
           lambda r, c: [(" ".join(_words(r, 1, 9)),) for _ in range(5)] + [("",), ("  ".join(_words(r, 2, 4)),)]),
    # level 8: harder, several ideas at once
    Family(8, "rpn", "rpn(tokens: list[str]) -> int",
           "Evaluate a reverse-Polish expression given as tokens: integers, '+', '-', '*', and '@' which replaces "
           "the top two values a, b (b on top) by {meaning}. Return the final value.",
           "def rpn(tokens):\n    stack = []\n    for t in tokens:\n        if t in ('+', '-', '*', '@'):\n"
           "            b = stack.pop()\n            a = stack.pop()\n"
           "            stack.append(a + b if t == '+' else a - b if t == '-' else a * b if t == '*' else {meaning})\n"
           "        else:\n            stack.append(int(t))\n    return stack[-1]\n",
           lambda r: {"meaning": r.choice(_RPN_EXTRA).format(c=r.randint(2, 199))},
           lambda r, c: [(_rpn_tokens(r),) for _ in range(6)]),
    Family(8, "min_coins", "min_coins(n: int) -> int",
           "Return the fewest coins with values {coins} (as many of each as needed) that add up to exactly n, or -1 "
           "if no combination does (0 coins for n = 0).",
           "def min_coins(n):\n    best = [0] + [-1] * n\n    for v in range(1, n + 1):\n"
           "        options = [best[v - c] for c in {coins} if c <= v and best[v - c] >= 0]\n"
           "        best[v] = min(options) + 1 if options else -1\n    return best[n]\n",
           lambda r: {"coins": sorted(r.sample(range(1, 41), r.randint(2, 4)))},
           lambda r, c: [(0,), (c["coins"][-1] + c["coins"][0],)] + _ints(r, 5, 1, 300)),
    Family(8, "edit_distance", "edit_distance(s: str) -> int",
           "Return the smallest number of single-character insertions, deletions and substitutions that turn s into "
           "{word!r}.",
           "def edit_distance(s):\n    t = {word!r}\n    prev = list(range(len(t) + 1))\n    for i, a in enumerate(s, 1):\n"
           "        cur = [i]\n        for j, b in enumerate(t, 1):\n"
           "            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a != b)))\n        prev = cur\n"
           "    return prev[-1]\n",
           lambda r: {"word": _word(r, 3, 8)},
           lambda r, c: [("",), (c["word"],)] + [(_mutate(r, c["word"]),) for _ in range(5)]),
    Family(8, "grid_paths", "grid_paths(grid: list[list[int]]) -> int",
           "grid is a rectangle of integers. Moving only right or down, count the paths from the top-left cell to "
           "the bottom-right cell that never step on a cell holding {blocked} (none if a corner holds {blocked}). "
           "Return the count modulo {m}.",
           "def grid_paths(grid):\n    rows, cols = len(grid), len(grid[0])\n    ways = [[0] * cols for _ in range(rows)]\n"
           "    for i in range(rows):\n        for j in range(cols):\n            if grid[i][j] == {blocked}:\n"
           "                continue\n            if i == 0 and j == 0:\n                ways[i][j] = 1\n"
           "            else:\n                ways[i][j] = (ways[i - 1][j] if i else 0) + (ways[i][j - 1] if j else 0)\n"
           "    return ways[-1][-1] % {m}\n",
           lambda r: {"blocked": r.randint(0, 9), "m": r.randint(2, 999)},
           lambda r, c: [(_blocked_grid(r, c["blocked"]),) for _ in range(6)] + [([[c["blocked"]]],)]),
    Family(8, "knapsack_best", "knapsack_best(items: list[list[int]]) -> int",
           "Each item is [weight, value] with a positive weight. Choose items, each at most once, whose weights add "
           "up to at most {cap}, so that their values add up to as much as possible; return that largest total "
           "value (0 if nothing fits).",
           "def knapsack_best(items):\n    best = [0] * ({cap} + 1)\n    for weight, value in items:\n"
           "        for room in range({cap}, weight - 1, -1):\n"
           "            best[room] = max(best[room], best[room - weight] + value)\n    return best[{cap}]\n",
           lambda r: {"cap": r.randint(1, 999)},
           lambda r, c: [([[r.randint(1, max(1, c["cap"] // 2)), r.randint(1, 99)] for _ in range(r.randint(1, 7))],)
                         for _ in range(5)] + [([],), ([[c["cap"] + 1, 50]],)]),
    Family(8, "min_rooms", "min_rooms(meetings: list[list[int]]) -> int",
           "Each meeting is [start, end] with start < end, in minutes. Meetings lasting less than {s} minutes are "
           "held by phone and need no room. A room holds one meeting at a time and needs {g} minutes after a "
           "meeting ends before the next one in it can start. Return the fewest rooms that can hold all the other "
           "meetings.",
           "def min_rooms(meetings):\n    import heapq\n    free = []\n"
           "    for start, end in sorted(m for m in meetings if m[1] - m[0] >= {s}):\n"
           "        if free and free[0] <= start:\n            heapq.heappop(free)\n"
           "        heapq.heappush(free, end + {g})\n    return len(free)\n",
           lambda r: {"s": r.randint(0, 30), "g": r.randint(0, 60)},
           lambda r, c: [([[s, s + r.randint(1, 90)] for s in sorted(r.randint(0, 300) for _ in range(r.randint(1, 8)))],)
                         for _ in range(6)] + [([],)]),
    Family(8, "subset_sum_count", "subset_sum_count(xs: list[int]) -> int",
           "In how many ways can you pick a non-empty set of positions of xs whose numbers add up to a multiple of "
           "{m}? Positions count as different even when their numbers are equal. Return that number.",
           "def subset_sum_count(xs):\n    ways = [1] + [0] * ({m} - 1)\n    for x in xs:\n"
           "        ways = [ways[r] + ways[(r - x) % {m}] for r in range({m})]\n    return ways[0] - 1\n",
           lambda r: {"m": r.randint(2, 999)},
           lambda r, c: [(_complements(r, c["m"]),) for _ in range(5)] + [([],), ([c["m"], c["m"]],)]),
    Family(8, "plus_before_times", "plus_before_times(expr: str) -> int",
           "expr is non-negative integers joined by '+' and '*', with no spaces or brackets. Evaluate it with '+' "
           "done before '*', the opposite of the usual rule: '2*3+4' means 2 * (3 + 4) = 14. Return the value "
           "modulo {m}.",
           "def plus_before_times(expr):\n    value = 1\n    for part in expr.split('*'):\n"
           "        value *= sum(int(n) for n in part.split('+'))\n    return value % {m}\n",
           lambda r: {"m": r.randint(2, 9999)},
           lambda r, c: [(_plus_times(r),) for _ in range(6)]),
)  # fmt: skip

REPORT_FAMILIES: tuple[Family, ...] = (
    # level 1
    Family(1, "repeat_text", "repeat_text(s: str) -> str", "Return s repeated {k} times, with {sep!r} between the copies.",
           "def repeat_text(s):\n    return {sep!r}.join([s] * {k})\n",
           lambda r: {"k": r.randint(2, 6), "sep": r.choice(_JOINERS)}, lambda r, c: [(_word(r, 0, 6),) for _ in range(6)]),
    Family(1, "longer_than", "longer_than(s: str) -> bool", "Return True if s has more than {k} characters, otherwise False.",
           "def longer_than(s):\n    return len(s) > {k}\n",
           lambda r: {"k": r.randint(0, 60)},
           lambda r, c: [("x" * c["k"],), ("y" * (c["k"] + 1),)] + [(_word(r, max(0, c["k"] - 3), c["k"] + 3),) for _ in range(4)]),
    # level 2
    Family(2, "count_char", "count_char(s: str) -> int", "Return how many times the character {ch!r} occurs in s.",
           "def count_char(s):\n    return s.count({ch!r})\n",
           lambda r: {"ch": r.choice(string.ascii_lowercase)}, lambda r, c: [(_with_char(r, c["ch"]),) for _ in range(6)]),
    Family(2, "pad_left", "pad_left(s: str) -> str",
           "Return s padded on the left with {fill!r} to a length of at least {w} (s unchanged if it is already that long).",
           "def pad_left(s):\n    return s.rjust({w}, {fill!r})\n",
           lambda r: {"w": r.randint(1, 20), "fill": r.choice([*_MARKS, "0", "x", " "])},
           lambda r, c: [("",)] + [(_word(r, 0, c["w"] + 3),) for _ in range(5)]),
    # level 3
    Family(3, "char_positions", "char_positions(s: str) -> list[int]",
           "Return the positions (counting from 0) where the character {ch!r} occurs in s, in increasing order.",
           "def char_positions(s):\n    return [i for i, c in enumerate(s) if c == {ch!r}]\n",
           lambda r: {"ch": r.choice(string.ascii_lowercase)}, lambda r, c: [("",)] + [(_with_char(r, c["ch"]),) for _ in range(5)]),
    Family(3, "running_total", "running_total(xs: list[int]) -> list[int]",
           "Return the running totals of xs, starting from {start}: the i-th result is {start} plus xs[0] + ... + xs[i].",
           "def running_total(xs):\n    out = []\n    total = {start}\n    for x in xs:\n        total += x\n"
           "        out.append(total)\n    return out\n",
           lambda r: {"start": r.randint(-999, 999)}, lambda r, c: [([],)] + _lists(r, 5, -50, 50)),
    # level 4
    Family(4, "ticket_price", "ticket_price(age: int) -> int",
           "Children under {a} pay {p1}, people aged {b} or older pay {p2}, everyone else pays {p3}; a negative age is "
           "invalid and gives -1. Return the price.",
           "def ticket_price(age):\n    if age < 0:\n        return -1\n    if age < {a}:\n        return {p1}\n"
           "    if age >= {b}:\n        return {p2}\n    return {p3}\n",
           lambda r: {"a": r.randint(3, 17), "b": r.randint(50, 75), "p1": r.randint(0, 10), "p2": r.randint(2, 15),
                      "p3": r.randint(8, 30)},
           lambda r, c: [(-1,), (c["a"] - 1,), (c["a"],), (c["b"],), (c["b"] - 1,)] + _ints(r, 2, 0, 99)),
    Family(4, "is_special_year", "is_special_year(year: int) -> bool",
           "A year is special if it is divisible by {a}, except that years divisible by {b} are not, except that "
           "years divisible by {c} are. Return True if year is special, otherwise False.",
           "def is_special_year(year):\n    if year % {c} == 0:\n        return True\n    if year % {b} == 0:\n"
           "        return False\n    return year % {a} == 0\n",
           lambda r: {"a": (a := r.randint(2, 9)), "b": (b := a * r.randint(2, 10)), "c": b * r.randint(2, 6)},
           lambda r, c: [(c["a"],), (c["b"],), (c["c"],), (c["a"] * 7 + 1,)] + _ints(r, 3, 1, 3000)),
    # level 5
    Family(5, "divisors_above", "divisors_above(n: int) -> int",
           "Return how many divisors of n (n >= 1) are greater than {k}.",
           "def divisors_above(n):\n    return sum(1 for d in range(1, n + 1) if n % d == 0 and d > {k})\n",
           lambda r: {"k": r.randint(0, 300)}, lambda r, c: [(1,), (720,)] + _ints(r, 4, 1, 2000)),
    Family(5, "second_largest", "second_largest(xs: list[int]) -> int",
           "Return the second largest distinct value in xs, or {default} if xs has fewer than two distinct values.",
           "def second_largest(xs):\n    values = sorted(set(xs))\n    return values[-2] if len(values) >= 2 else {default}\n",
           lambda r: {"default": r.randint(100, 999) * r.choice((-1, 1))},
           lambda r, c: [([],), ([5, 5],)] + _lists(r, 4, -50, 50, (1, 9))),
    # level 6
    Family(6, "digit_sum_total", "digit_sum_total(xs: list[int]) -> int",
           "Return the total of the digit sums of the numbers in xs that are greater than {k} (a negative number has "
           "the digit sum of its absolute value).",
           "def digit_sum_total(xs):\n    return sum(sum(int(d) for d in str(abs(x))) for x in xs if x > {k})\n",
           lambda r: {"k": r.randint(-60, 60)}, lambda r, c: [([],)] + _lists(r, 5, -999, 999)),
    Family(6, "initials", "initials(text: str) -> str",
           "Return the upper-cased first letters of the words of text (split on spaces) longer than {k} characters, "
           "joined by {sep!r}.",
           "def initials(text):\n    return {sep!r}.join(w[0].upper() for w in text.split() if len(w) > {k})\n",
           lambda r: {"k": r.randint(0, 5), "sep": r.choice(_JOINERS)},
           lambda r, c: [("",)] + [(" ".join(_words(r, 1, 6)),) for _ in range(5)]),
    # level 7
    Family(7, "balanced", "balanced(s: str) -> bool",
           "Return True if the brackets {pairs} in s are balanced and properly nested and the nesting depth never "
           "exceeds {k}; other characters are ignored.",
           "def balanced(s):\n    pairs = dict(zip({closers!r}, {openers!r}))\n    stack = []\n    for ch in s:\n"
           "        if ch in {openers!r}:\n            stack.append(ch)\n            if len(stack) > {k}:\n"
           "                return False\n        elif ch in pairs:\n            if not stack or stack.pop() != pairs[ch]:\n"
           "                return False\n    return not stack\n",
           lambda r: _bracket_consts(r),
           lambda r, c: [("",)] + [(_bracket_text(r, c),) for _ in range(7)]),
    Family(7, "anagram_of", "anagram_of(s: str) -> bool",
           "Return True if s is an anagram of {word!r}: the same letters the same number of times, ignoring case and "
           "spaces. Otherwise return False.",
           "def anagram_of(s):\n    return sorted(s.replace(' ', '').lower()) == sorted({word!r})\n",
           lambda r: {"word": _word(r, 4, 8)},
           lambda r, c: [(c["word"],), ("",)] + [(_shuffled(r, c["word"], r.random() < 0.5),) for _ in range(5)]),
    # level 8
    Family(8, "spiral_every", "spiral_every(grid: list[list[int]]) -> list[int]",
           "Read the rectangular grid in {direction} spiral order starting at the top-left corner, skip the first "
           "{s} values, and return every {k}-th value of the rest starting with the first.",
           "def spiral_every(grid):\n    out = []\n    g = [row[:] for row in grid]\n{turn}    while g and g[0]:\n"
           "        out += g.pop(0)\n        g = [list(r) for r in zip(*g)][::-1]\n    return out[{s}::{k}]\n",
           lambda r: {"k": r.randint(1, 5), "s": r.randint(0, 9), **_spiral_direction(r)},
           lambda r, c: [(_grid(r),) for _ in range(6)]),
    Family(8, "longest_step_run", "longest_step_run(xs: list[int]) -> int",
           "Return the length of the longest contiguous run in xs where each element is exactly {k} more than the "
           "previous one (a single element is a run of length 1; an empty list gives 0).",
           "def longest_step_run(xs):\n    best = cur = 0\n    for i, x in enumerate(xs):\n"
           "        cur = cur + 1 if i and x - xs[i - 1] == {k} else 1\n        best = max(best, cur)\n    return best\n",
           lambda r: {"k": r.randint(-60, 60)},
           lambda r, c: [([],)] + [(_step_list(r, c["k"]),) for _ in range(5)]),
)  # fmt: skip

_RPN_EXTRA: tuple[str, ...] = (
    "a * {c} + b",
    "a - b * {c}",
    "max(a, b) * {c}",
    "min(a, b) - {c}",
    "(a + b) * {c}",
    "abs(a - b) + {c}",
)
_BRACKETS = ("()", "[]", "{}", "<>")


def _run_length_consts(rng: random.Random) -> dict[str, Any]:
    sep, join, count_first = rng.choice(_SEPS), rng.choice(_JOINS), rng.random() < 0.5
    if count_first:
        form = f"the run length followed by {sep!r} and the character"
        piece = f"str(j - i) + {sep!r} + s[i]"
        example = join.join([f"2{sep}a", f"1{sep}b"])
    else:
        form = f"the character followed by {sep!r} and the run length"
        piece = f"s[i] + {sep!r} + str(j - i)"
        example = join.join([f"a{sep}2", f"b{sep}1"])
    return {"sep": sep, "join": join, "count_first": count_first, "form": form, "piece": piece, "example": example}


def _base_consts(rng: random.Random) -> dict[str, Any]:
    b = rng.randint(2, 16)
    digits = "".join(rng.sample(string.digits + string.ascii_lowercase, b))  # usual digits would be 15 programs
    return {"b": b, "digits": digits, "top": b - 1, "zero": digits[0]}


def _bracket_consts(rng: random.Random) -> dict[str, Any]:
    kinds = sorted(rng.sample(_BRACKETS, rng.randint(1, 3)), key=_BRACKETS.index)  # a set: one order only
    return {
        "pairs": " ".join(kinds),
        "openers": "".join(k[0] for k in kinds),
        "closers": "".join(k[1] for k in kinds),
        "k": rng.randint(1, 9),
    }


def _spiral_direction(rng: random.Random) -> dict[str, str]:
    if rng.random() < 0.5:
        return {"direction": "clockwise", "turn": ""}
    # Counter-clockwise from the top-left corner is clockwise over the transposed grid.
    return {"direction": "counter-clockwise", "turn": "    g = [list(r) for r in zip(*g)]\n"}


def _bracket_text(rng: random.Random, consts: dict[str, Any]) -> str:
    out, stack = [], []
    for _ in range(rng.randint(2, 14)):
        roll = rng.random()
        if roll < 0.45:
            i = rng.randrange(len(consts["openers"]))
            out.append(consts["openers"][i])
            stack.append(consts["closers"][i])
        elif roll < 0.85 and stack:
            out.append(stack.pop())
        elif roll < 0.92:
            out.append(rng.choice(consts["closers"]))
        else:
            out.append(rng.choice("xy "))
    if rng.random() < 0.6:
        out.extend(reversed(stack))
    return "".join(out)


def _rpn_tokens(rng: random.Random) -> list[str]:
    ops = ["+", "-", "*", "@"]
    tokens = [str(rng.randint(1, 9))]
    depth = 1
    for _ in range(rng.randint(1, 5)):
        tokens.append(str(rng.randint(1, 9)))
        depth += 1
        if rng.random() < 0.5 or depth > 2:
            tokens.append(rng.choice(ops))
            depth -= 1
    while depth > 1:
        tokens.append(rng.choice(ops))
        depth -= 1
    return tokens


def _mutate(rng: random.Random, word: str) -> str:
    """``word`` after one to three random insertions, deletions or substitutions (or a fresh word)."""
    if rng.random() < 0.2:
        return _word(rng, 0, 9)
    chars = list(word)
    for _ in range(rng.randint(1, 3)):
        roll, at = rng.random(), rng.randint(0, len(chars))
        if roll < 0.35:
            chars.insert(at, rng.choice(string.ascii_lowercase))
        elif roll < 0.7 and chars:
            del chars[min(at, len(chars) - 1)]
        elif chars:
            chars[min(at, len(chars) - 1)] = rng.choice(string.ascii_lowercase)
    return "".join(chars)


def _shuffled(rng: random.Random, word: str, exact: bool) -> str:
    chars = list(word)
    rng.shuffle(chars)
    if not exact:
        chars[rng.randrange(len(chars))] = rng.choice(string.ascii_lowercase)
    if rng.random() < 0.4:
        chars.insert(rng.randint(0, len(chars)), " ")
    return "".join(c.upper() if rng.random() < 0.2 else c for c in chars)


def _grid(rng: random.Random) -> list[list[int]]:
    rows, cols = rng.randint(1, 4), rng.randint(1, 4)
    return [[rng.randint(0, 9) for _ in range(cols)] for _ in range(rows)]


def _step_list(rng: random.Random, k: int) -> list[int]:
    xs = [rng.randint(-10, 10)]
    for _ in range(rng.randint(0, 10)):
        xs.append(xs[-1] + k if rng.random() < 0.6 else rng.randint(-10, 10))
    return xs


# Entry separators for parse_assignments: none of them '=', '-' or a digit, which the entries themselves use.
_ENTRY_SEPS: tuple[str, ...] = (";", ",", " ", "|", "&", "/", ", ", "; ", " | ", "\n", "::", "#")
_ROMAN: tuple[tuple[int, str], ...] = (
    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"), (50, "L"), (40, "XL"),
    (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
)  # fmt: skip


def _labels(rng: random.Random, n: int) -> list[str]:
    """``n`` distinct words, for families that return one of several labels."""
    out: list[str] = []
    while len(out) < n:
        if (word := _word(rng, 3, 6)) not in out:
            out.append(word)
    return out


def _table(rng: random.Random, low: int, high: int, lo: int, hi: int) -> dict[str, int]:
    """A small word-to-number table; its keys in alphabetical order, so one table is one program."""
    return {key: rng.randint(lo, hi) for key in sorted(rng.sample(_VOCAB, rng.randint(low, high)))}


def _same_remainders(rng: random.Random, m: int) -> list[int]:
    """Numbers from two or three remainder classes modulo ``m``, so remainders repeat."""
    classes = [rng.randrange(m) for _ in range(rng.randint(2, 3))]
    return [rng.choice(classes) + m * rng.randint(-3, 3) for _ in range(rng.randint(1, 9))]


def _palindrome(rng: random.Random, drop: str, exact: bool) -> str:
    """A palindrome (or, without ``exact``, a near one) in mixed case with characters of ``drop`` sprinkled in."""
    half = _word(rng, 1, 5)
    chars = list(half + rng.choice(["", rng.choice(string.ascii_lowercase)]) + half[::-1])
    if not exact:
        chars[rng.randrange(len(chars))] = rng.choice(string.ascii_lowercase)
    for _ in range(rng.randint(0, 4)):
        chars.insert(rng.randint(0, len(chars)), rng.choice(drop + "xy" if rng.random() < 0.1 else drop))
    return "".join(c.upper() if rng.random() < 0.3 else c for c in chars)


def _assignments(rng: random.Random, sep: str) -> str:
    entries = []
    for _ in range(rng.randint(1, 5)):
        if rng.random() < 0.15:
            entries.append(_word(rng, 1, 4))  # no '=': skipped
        else:
            entries.append(f"{rng.choice(_VOCAB[:5])}={rng.randint(-99, 99)}")
    return sep.join(entries)


def _number_tokens(rng: random.Random, k: int) -> str:
    tokens = []
    for _ in range(rng.randint(1, 8)):
        roll = rng.random()
        if roll < 0.6:
            tokens.append(str(rng.randint(k - 20, k + 40)))
        elif roll < 0.8:
            tokens.append(_word(rng, 1, 5))
        else:
            tokens.append(rng.choice(["-", "--3", "4a", "x9", "-7", "+5", "007"]))
    return " ".join(tokens)


def _nested(rng: random.Random, depth: int) -> list[Any]:
    out: list[Any] = []
    for _ in range(rng.randint(0, 4)):
        if depth < 4 and rng.random() < 0.35:
            out.append(_nested(rng, depth + 1))
        else:
            out.append(rng.randint(-20, 50))
    return out


def _roman(n: int) -> str:
    out = []
    for value, symbol in _ROMAN:
        while n >= value:
            out.append(symbol)
            n -= value
    return "".join(out)


def _blocked_grid(rng: random.Random, blocked: int) -> list[list[int]]:
    rows, cols = rng.randint(1, 5), rng.randint(1, 5)
    others = [d for d in range(10) if d != blocked]
    grid = [[blocked if rng.random() < 0.15 else rng.choice(others) for _ in range(cols)] for _ in range(rows)]
    if rng.random() < 0.85:  # mostly open corners, so most grids have paths
        grid[0][0], grid[-1][-1] = (blocked + 1) % 10, (blocked + 2) % 10
    return grid


def _complements(rng: random.Random, m: int) -> list[int]:
    """Numbers that often add up to a multiple of ``m``: a few residues, their complements and ``m`` itself."""
    bases = [rng.randint(1, m) for _ in range(rng.randint(1, 3))]
    pool = [*bases, *(m - b if b < m else m for b in bases), m]
    return [rng.choice(pool) for _ in range(rng.randint(1, 9))]


def _plus_times(rng: random.Random) -> str:
    expr = str(rng.randint(0, 20))
    for _ in range(rng.randint(1, 5)):
        expr += rng.choice("+*") + str(rng.randint(0, 20))
    return expr


def families_for(level: int, split: Split = "train") -> list[Family]:
    pool = FAMILIES if split == "train" else REPORT_FAMILIES
    return [family for family in pool if family.level == level]


LEVELS: tuple[int, ...] = tuple(sorted({family.level for family in FAMILIES}))
assert LEVELS == tuple(sorted({family.level for family in REPORT_FAMILIES})), "every level needs report families"
assert not {f.name for f in FAMILIES} & {f.name for f in REPORT_FAMILIES}, "a family is training or report, not both"
