"""Unit conversions as Lamarck skills.

Each function is one skill: Lamarck stores its source, and its ``tests`` attribute (assert statements) must pass in
Lamarck's sandbox before the skill is offered to agents. Functions are self-contained (no module-level helpers),
because only the function's own source travels with the skill. This package does not import Lamarck.
"""

KM_PER_MILE = 1.609344  # documentation only: each function repeats the constant it needs
KG_PER_LB = 0.45359237


def km_to_miles(km: float) -> float:
    """Convert a distance in kilometres to miles."""
    return round(km / 1.609344, 6)


km_to_miles.tests = """
assert km_to_miles(0) == 0
assert km_to_miles(1.609344) == 1
assert abs(km_to_miles(10) - 6.213712) < 1e-6
"""


def miles_to_km(miles: float) -> float:
    """Convert a distance in miles to kilometres."""
    return round(miles * 1.609344, 6)


miles_to_km.tests = """
assert miles_to_km(1) == 1.609344
assert abs(miles_to_km(26.2) - 42.164813) < 1e-6
"""


def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit."""
    return round(celsius * 9 / 5 + 32, 6)


celsius_to_fahrenheit.tests = """
assert celsius_to_fahrenheit(0) == 32
assert celsius_to_fahrenheit(100) == 212
assert celsius_to_fahrenheit(-40) == -40
"""


def fahrenheit_to_celsius(fahrenheit: float) -> float:
    """Convert a temperature from degrees Fahrenheit to degrees Celsius."""
    return round((fahrenheit - 32) * 5 / 9, 6)


fahrenheit_to_celsius.tests = """
assert fahrenheit_to_celsius(32) == 0
assert fahrenheit_to_celsius(212) == 100
assert fahrenheit_to_celsius(-40) == -40
"""


def kg_to_lb(kg: float) -> float:
    """Convert a mass in kilograms to pounds."""
    return round(kg / 0.45359237, 6)


kg_to_lb.tests = """
assert kg_to_lb(0.45359237) == 1
assert abs(kg_to_lb(70) - 154.323584) < 1e-6
"""


def lb_to_kg(lb: float) -> float:
    """Convert a mass in pounds to kilograms."""
    return round(lb * 0.45359237, 6)


lb_to_kg.tests = """
assert lb_to_kg(1) == 0.453592
assert lb_to_kg(0) == 0
"""
