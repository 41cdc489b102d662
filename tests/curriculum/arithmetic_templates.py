"""Regexes that recognise a sentence a family template could have produced (shared by the leak tests)."""

from __future__ import annotations

import re

from lamarck.curriculum.environments.arithmetic_families import Family
from lamarck.curriculum.environments.arithmetic_language import NAMES, NUMBER_WORDS

_NUMBER = r"(?:\d+|" + "|".join(NUMBER_WORDS) + ")"
_PRONOUNS = r"(?:she|he|her|his|him)"


def template_patterns(family: Family) -> list[re.Pattern[str]]:
    if family.name not in _CACHE:
        _CACHE[family.name] = _compile(family)
    return _CACHE[family.name]


_CACHE: dict[str, list[re.Pattern[str]]] = {}


def _compile(family: Family) -> list[re.Pattern[str]]:
    slots = {
        "name": "(?:" + "|".join(name for name, _ in NAMES) + ")",
        "item": "(?:" + "|".join(map(re.escape, family.items)) + ")",
        "n": _NUMBER, "a": _NUMBER, "b": _NUMBER,
        "pron": _PRONOUNS, "Pron": _PRONOUNS, "poss": _PRONOUNS, "Poss": _PRONOUNS, "obj": _PRONOUNS,
        "clauses": ".+",
    }  # fmt: skip
    patterns = []
    for template in family.templates():
        parts = re.split(r"(\{\w+\})", template.rstrip(".?"))
        regex = "".join(slots[part[1:-1]] if part.startswith("{") else re.escape(part) for part in parts)
        patterns.append(re.compile(regex, re.IGNORECASE))
    return patterns


def matching_templates(text: str, families: tuple[Family, ...]) -> list[str]:
    return [
        f"{family.name}: {pattern.pattern}"
        for family in families
        for pattern in template_patterns(family)
        if pattern.search(text)
    ]
