"""Parametrised task templates for ``python_functions``: per level, families whose constants are drawn at random.

Each family's ``code`` is the reference solution (our own code, run in-process to compute expected values);
``describe`` and ``code`` are ``str.format`` templates over the drawn constants.

Two disjoint pools:

- ``FAMILIES`` (training): what training, the dev slice and the gate draw from. Every family's constants span
  about a thousand programs or more, so reserving the gate's and dev's programs (family and constants, the task's
  key) leaves training almost all of a level and ``heldout`` can protect every level by key.
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


def families_for(level: int, split: Split = "train") -> list[Family]:
    pool = FAMILIES if split == "train" else REPORT_FAMILIES
    return [family for family in pool if family.level == level]


LEVELS: tuple[int, ...] = tuple(sorted({family.level for family in FAMILIES}))
assert LEVELS == tuple(sorted({family.level for family in REPORT_FAMILIES})), "every level needs report families"
assert not {f.name for f in FAMILIES} & {f.name for f in REPORT_FAMILIES}, "a family is training or report, not both"
