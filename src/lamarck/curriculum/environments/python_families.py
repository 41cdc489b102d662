"""Parametrised task templates for ``python_functions``: per level, families whose constants are drawn at random.

Each family's ``code`` is the reference solution (our own code, run in-process to compute expected values);
``describe`` and ``code`` are ``str.format`` templates over the drawn constants.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Args = tuple[Any, ...]


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


FAMILIES: tuple[Family, ...] = (
    # level 1: one-liners
    Family(1, "add_constant", "add_constant(x: int) -> int", "Return x plus {k}.",
           "def add_constant(x):\n    return x + {k}\n",
           lambda r: {"k": r.randint(2, 999)}, lambda r, c: _ints(r, 6, -500, 500)),
    Family(1, "scale", "scale(x: int) -> int", "Return x multiplied by {k}.",
           "def scale(x):\n    return x * {k}\n",
           lambda r: {"k": r.randint(2, 99)}, lambda r, c: _ints(r, 6, -200, 200)),
    Family(1, "add_and_shift", "add_and_shift(a: int, b: int) -> int", "Return the sum of a and b, minus {k}.",
           "def add_and_shift(a, b):\n    return a + b - {k}\n",
           lambda r: {"k": r.randint(0, 500)},
           lambda r, c: [(r.randint(-300, 300), r.randint(-300, 300)) for _ in range(6)]),
    Family(1, "reverse_suffix", "reverse_suffix(s: str) -> str",
           "Return the string s reversed, followed by the text {suffix!r}.",
           "def reverse_suffix(s):\n    return s[::-1] + {suffix!r}\n",
           lambda r: {"suffix": _word(r, 1, 4)}, lambda r, c: [(_word(r, 0, 10),) for _ in range(6)]),
    Family(1, "is_multiple", "is_multiple(x: int) -> bool", "Return True if x is divisible by {k}, otherwise False.",
           "def is_multiple(x):\n    return x % {k} == 0\n",
           lambda r: {"k": r.randint(2, 30)},
           lambda r, c: [(c["k"] * r.randint(-20, 20),) for _ in range(3)] + _ints(r, 3, -300, 300)),
    # level 2: builtins and simple conditions
    Family(2, "clamp", "clamp(x: int) -> int", "Return x limited to the range {lo}..{hi}: below {lo} give {lo}, above {hi} give {hi}.",
           "def clamp(x):\n    return min(max(x, {lo}), {hi})\n",
           lambda r: {"lo": (lo := r.randint(-50, 50)), "hi": lo + r.randint(1, 100)},
           lambda r, c: [(c["lo"] - 1,), (c["hi"] + 1,), (c["lo"],)] + _ints(r, 4, c["lo"] - 60, c["hi"] + 60)),
    Family(2, "count_char", "count_char(s: str) -> int", "Return how many times the character {ch!r} occurs in s.",
           "def count_char(s):\n    return s.count({ch!r})\n",
           lambda r: {"ch": r.choice("aeiorstn")}, lambda r, c: [(_word(r, 0, 20),) for _ in range(6)]),
    Family(2, "larger_minus", "larger_minus(a: int, b: int) -> int", "Return the larger of a and b, minus {k}.",
           "def larger_minus(a, b):\n    return max(a, b) - {k}\n",
           lambda r: {"k": r.randint(1, 200)},
           lambda r, c: [(r.randint(-99, 99), r.randint(-99, 99)) for _ in range(6)]),
    Family(2, "has_prefix", "has_prefix(s: str) -> bool", "Return True if s starts with {p!r} or ends with {q!r}.",
           "def has_prefix(s):\n    return s.startswith({p!r}) or s.endswith({q!r})\n",
           lambda r: {"p": _word(r, 1, 3), "q": _word(r, 1, 2)},
           lambda r, c: [(c["p"] + _word(r, 0, 5),), (_word(r, 0, 5) + c["q"],)] + [(_word(r, 1, 8),) for _ in range(4)]),
    # level 3: loops
    Family(3, "sum_multiples", "sum_multiples(n: int) -> int",
           "Return the sum of all integers from 1 to n (inclusive) that are divisible by {k}.",
           "def sum_multiples(n):\n    return sum(i for i in range(1, n + 1) if i % {k} == 0)\n",
           lambda r: {"k": r.randint(2, 13)}, lambda r, c: [(0,)] + _ints(r, 5, 1, 400)),
    Family(3, "count_in_set", "count_in_set(s: str) -> int",
           "Return how many characters of s are one of the letters in {letters!r}.",
           "def count_in_set(s):\n    return sum(1 for ch in s if ch in {letters!r})\n",
           lambda r: {"letters": "".join(r.sample(string.ascii_lowercase, r.randint(2, 6)))},
           lambda r, c: [("",)] + [(_word(r, 1, 25),) for _ in range(5)]),
    Family(3, "long_words", "long_words(words: list[str]) -> list[str]",
           "Return the words longer than {k} characters, in their original order.",
           "def long_words(words):\n    return [w for w in words if len(w) > {k}]\n",
           lambda r: {"k": r.randint(2, 6)}, lambda r, c: [(_words(r, 0, 8),) for _ in range(6)]),
    Family(3, "digit_power_sum", "digit_power_sum(n: int) -> int",
           "Return the sum of the decimal digits of n (n >= 0), each raised to the power {p}.",
           "def digit_power_sum(n):\n    return sum(int(d) ** {p} for d in str(n))\n",
           lambda r: {"p": r.randint(1, 4)}, lambda r, c: [(0,)] + _ints(r, 5, 1, 10**6)),
    Family(3, "product_mod", "product_mod(xs: list[int]) -> int",
           "Return the product of all numbers in xs modulo {m} (the product of an empty list is 1).",
           "def product_mod(xs):\n    p = 1\n    for x in xs:\n        p = p * x % {m}\n    return p % {m}\n",
           lambda r: {"m": r.randint(7, 1000)}, lambda r, c: [([],)] + _lists(r, 5, 1, 99)),
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
           lambda r: {"k": r.randint(5, 500)}, lambda r, c: [(0,), (c["k"],), (c["k"] - 1,), (-3,)] + _ints(r, 3, -999, 999)),
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
           "Run-length encode s: each run of a repeated character becomes the character followed by {sep!r} and the "
           "run length, runs joined by {join!r}. For example 'aab' gives 'a{sep}2{join}b{sep}1'.",
           "def run_length(s):\n    out = []\n    i = 0\n    while i < len(s):\n        j = i\n"
           "        while j < len(s) and s[j] == s[i]:\n            j += 1\n        out.append(s[i] + {sep!r} + str(j - i))\n"
           "        i = j\n    return {join!r}.join(out)\n",
           lambda r: {"sep": r.choice(["", ":", "=", "x"]), "join": r.choice(["", ",", "-", ";"])},
           lambda r, c: [("",)] + [("".join(r.choice("abc") * r.randint(1, 4) for _ in range(r.randint(1, 6))),) for _ in range(5)]),
    Family(5, "window_sums", "window_sums(xs: list[int]) -> list[int]",
           "Return the sums of every window of {k} consecutive elements of xs, in order (empty if xs is shorter).",
           "def window_sums(xs):\n    return [sum(xs[i:i + {k}]) for i in range(len(xs) - {k} + 1)]\n",
           lambda r: {"k": r.randint(2, 5)}, lambda r, c: _lists(r, 6, -50, 50, (0, 10))),
    Family(5, "steps_below", "steps_below(n: int) -> int",
           "Starting from n, repeatedly replace n by n // 2 if n is even, or by n * 3 + 1 if n is odd; return how many "
           "replacements happen before n is below {k} (0 if it already is).",
           "def steps_below(n):\n    steps = 0\n    while n >= {k}:\n        n = n // 2 if n % 2 == 0 else n * 3 + 1\n"
           "        steps += 1\n    return steps\n",
           lambda r: {"k": r.randint(2, 20)}, lambda r, c: [(1,)] + _ints(r, 5, 1, 3000)),
    # level 6: compositions of earlier functions
    Family(6, "even_square_sum", "even_square_sum(xs: list[int]) -> int",
           "Return the sum of the squares of the even numbers in xs that are greater than {k}.",
           "def even_square_sum(xs):\n    return sum(x * x for x in xs if x % 2 == 0 and x > {k})\n",
           lambda r: {"k": r.randint(-20, 20)}, lambda r, c: [([],)] + _lists(r, 5, -40, 40)),
    Family(6, "shift_reverse", "shift_reverse(s: str) -> str",
           "Shift every lower-case letter of s {k} places forward in the alphabet (wrapping z to a; other characters "
           "unchanged), then return the result reversed.",
           "def shift_reverse(s):\n    out = ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)\n"
           "    return out[::-1]\n",
           lambda r: {"k": r.randint(1, 25)}, lambda r, c: [(" ".join(_words(r, 0, 3)),) for _ in range(6)]),
    Family(6, "count_primes_above", "count_primes_above(xs: list[int]) -> int",
           "Return how many numbers in xs are prime and greater than {k}.",
           "def count_primes_above(xs):\n    def is_prime(n):\n        if n < 2:\n            return False\n"
           "        i = 2\n        while i * i <= n:\n            if n % i == 0:\n                return False\n"
           "            i += 1\n        return True\n    return sum(1 for x in xs if x > {k} and is_prime(x))\n",
           lambda r: {"k": r.randint(0, 30)}, lambda r, c: [([],)] + _lists(r, 5, -5, 200, (1, 12))),
    Family(6, "product_digit_sum", "product_digit_sum(xs: list[int]) -> int",
           "Multiply all numbers in xs together (empty product is 1), take the absolute value, and return the sum "
           "of its decimal digits plus {k}.",
           "def product_digit_sum(xs):\n    p = 1\n    for x in xs:\n        p *= x\n"
           "    return sum(int(d) for d in str(abs(p))) + {k}\n",
           lambda r: {"k": r.randint(0, 50)}, lambda r, c: [([],)] + _lists(r, 5, -30, 30, (1, 7))),
    # level 7: classic problems
    Family(7, "to_base", "to_base(n: int) -> str",
           "Return the non-negative integer n written in base {b} (digits 0-{top}, no prefix; 0 gives '0').",
           "def to_base(n):\n    if n == 0:\n        return '0'\n    digits = []\n    while n:\n"
           "        digits.append(str(n % {b}))\n        n //= {b}\n    return ''.join(reversed(digits))\n",
           lambda r: {"b": (b := r.randint(2, 9)), "top": b - 1}, lambda r, c: [(0,)] + _ints(r, 5, 1, 10**5)),
    Family(7, "balanced", "balanced(s: str) -> bool",
           "Return True if the brackets {pairs} in s are balanced and properly nested and the nesting depth never "
           "exceeds {k}; other characters are ignored.",
           "def balanced(s):\n    pairs = dict(zip({closers!r}, {openers!r}))\n    stack = []\n    for ch in s:\n"
           "        if ch in {openers!r}:\n            stack.append(ch)\n            if len(stack) > {k}:\n"
           "                return False\n        elif ch in pairs:\n            if not stack or stack.pop() != pairs[ch]:\n"
           "                return False\n    return not stack\n",
           lambda r: _bracket_consts(r),
           lambda r, c: [("",)] + [(_bracket_text(r, c),) for _ in range(7)]),
    Family(7, "merge_close", "merge_close(intervals: list[list[int]]) -> list[list[int]]",
           "Given intervals [start, end] (start <= end), merge every two intervals whose gap is at most {g} "
           "(overlapping ones included) and return the merged intervals sorted by start.",
           "def merge_close(intervals):\n    out = []\n    for s, e in sorted(intervals):\n"
           "        if out and s - out[-1][1] <= {g}:\n            out[-1][1] = max(out[-1][1], e)\n"
           "        else:\n            out.append([s, e])\n    return out\n",
           lambda r: {"g": r.randint(0, 5)},
           lambda r, c: [([],)] + [([[s, s + r.randint(0, 8)] for s in (r.randint(0, 60) for _ in range(r.randint(1, 6)))],)
                                   for _ in range(5)]),
    Family(7, "top_words", "top_words(text: str) -> list[str]",
           "Return the {k} most frequent words of text (split on spaces, lower-cased), most frequent first, ties in "
           "alphabetical order; fewer if there are fewer distinct words.",
           "def top_words(text):\n    counts = {{}}\n    for w in text.lower().split():\n        counts[w] = counts.get(w, 0) + 1\n"
           "    return sorted(counts, key=lambda w: (-counts[w], w))[:{k}]\n",
           lambda r: {"k": r.randint(1, 4)},
           lambda r, c: [("",)] + [(" ".join(r.choice(["ant", "Bee", "cat", "dog", "bee", "eel"]) for _ in range(r.randint(1, 12))),)
                                   for _ in range(5)]),
    # level 8: harder, several ideas at once
    Family(8, "rpn", "rpn(tokens: list[str]) -> int",
           "Evaluate a reverse-Polish expression given as tokens: integers, '+', '-', '*', and {sym!r} which replaces "
           "the top two values a, b (b on top) by {meaning}. Return the final value.",
           "def rpn(tokens):\n    stack = []\n    for t in tokens:\n        if t in ('+', '-', '*', {sym!r}):\n"
           "            b = stack.pop()\n            a = stack.pop()\n"
           "            stack.append(a + b if t == '+' else a - b if t == '-' else a * b if t == '*' else {expr})\n"
           "        else:\n            stack.append(int(t))\n    return stack[-1]\n",
           lambda r: dict(zip(("sym", "meaning", "expr"), r.choice(_RPN_EXTRA))),
           lambda r, c: [(_rpn_tokens(r, c["sym"]),) for _ in range(6)]),
    Family(8, "spiral_every", "spiral_every(grid: list[list[int]]) -> list[int]",
           "Read the rectangular grid in clockwise spiral order starting at the top-left corner, and return every "
           "{k}-th value of that order starting with the first.",
           "def spiral_every(grid):\n    out = []\n    g = [row[:] for row in grid]\n    while g and g[0]:\n"
           "        out += g.pop(0)\n        g = [list(r) for r in zip(*g)][::-1]\n    return out[::{k}]\n",
           lambda r: {"k": r.randint(1, 3)},
           lambda r, c: [(_grid(r),) for _ in range(6)]),
    Family(8, "longest_step_run", "longest_step_run(xs: list[int]) -> int",
           "Return the length of the longest contiguous run in xs where each element is exactly {k} more than the "
           "previous one (a single element is a run of length 1; an empty list gives 0).",
           "def longest_step_run(xs):\n    best = cur = 0\n    for i, x in enumerate(xs):\n"
           "        cur = cur + 1 if i and x - xs[i - 1] == {k} else 1\n        best = max(best, cur)\n    return best\n",
           lambda r: {"k": r.randint(-3, 4)},
           lambda r, c: [([],)] + [(_step_list(r, c["k"]),) for _ in range(5)]),
)  # fmt: skip

_RPN_EXTRA = (
    ("max", "the larger of the two", "max(a, b)"),
    ("min", "the smaller of the two", "min(a, b)"),
    ("//", "a // b (floor division)", "a // b"),
    ("%", "a % b (Python remainder)", "a % b"),
    ("avg", "their average rounded down, (a + b) // 2", "(a + b) // 2"),
)


def _bracket_consts(rng: random.Random) -> dict[str, Any]:
    kinds = rng.sample(["()", "[]", "{}", "<>"], rng.randint(1, 3))
    return {
        "pairs": " ".join(kinds),
        "openers": "".join(k[0] for k in kinds),
        "closers": "".join(k[1] for k in kinds),
        "k": rng.randint(2, 5),
    }


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


def _rpn_tokens(rng: random.Random, extra: str) -> list[str]:
    tokens = [str(rng.randint(1, 9))]
    depth = 1
    for _ in range(rng.randint(1, 5)):
        tokens.append(str(rng.randint(1, 9)))
        depth += 1
        if rng.random() < 0.5 or depth > 2:
            tokens.append(rng.choice(["+", "-", "*", extra]))
            depth -= 1
    while depth > 1:
        tokens.append(rng.choice(["+", "-", "*", extra]))
        depth -= 1
    return tokens


def _grid(rng: random.Random) -> list[list[int]]:
    rows, cols = rng.randint(1, 4), rng.randint(1, 4)
    return [[rng.randint(0, 9) for _ in range(cols)] for _ in range(rows)]


def _step_list(rng: random.Random, k: int) -> list[int]:
    xs = [rng.randint(-10, 10)]
    for _ in range(rng.randint(0, 10)):
        xs.append(xs[-1] + k if rng.random() < 0.6 else rng.randint(-10, 10))
    return xs


def families_for(level: int) -> list[Family]:
    return [family for family in FAMILIES if family.level == level]


LEVELS: tuple[int, ...] = tuple(sorted({family.level for family in FAMILIES}))
