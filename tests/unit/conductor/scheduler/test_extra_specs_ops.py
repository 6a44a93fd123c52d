"""extra_specs_ops.match against Nova's documented operators (the cases of Nova's
test_extra_specs_ops.py, restated)."""

from __future__ import annotations

import pytest

from fleetcache.conductor.scheduler.filters.extra_specs_ops import match


@pytest.mark.parametrize(("value", "req", "expected"), [
    # no operator: exact string equality with the whole requirement
    ("1", "1", True), ("1", "2", False), ("true", "True", False), ("a b", "a b", True),
    # "=" is numeric "at least"
    ("123", "= 123", True), ("124", "= 123", True), ("122", "= 123", False),
    ("2.0", "= 2", True),
    # numeric comparisons
    ("123", "== 123", True), ("123.0", "== 123", True), ("124", "== 123", False),
    ("124", "!= 123", True), ("123", "!= 123", False),
    ("124", ">= 123", True), ("123", ">= 123", True), ("122", ">= 123", False),
    ("122", "<= 123", True), ("124", "<= 123", False),
    # string comparisons
    ("abc", "s== abc", True), ("abcd", "s== abc", False),
    ("abcd", "s!= abc", True), ("abc", "s!= abc", False),
    ("abc", "s< abd", True), ("abd", "s< abc", False),
    ("abc", "s<= abc", True), ("abd", "s<= abc", False),
    ("abd", "s> abc", True), ("abc", "s> abc", False),
    ("abc", "s>= abc", True), ("abb", "s>= abc", False),
    # substring and all-substrings
    ("12311321", "<in> 11", True), ("12311321", "<in> 12311321", True),
    ("12311321", "<in> 99", False),
    ("12311321", "<all-in> 11 21", True), ("12311321", "<all-in> 11 99", False),
    # <or>: equal to one alternative
    ("12", "<or> 11 <or> 12", True), ("13", "<or> 11 <or> 12", False),
    ("11", "<or> 11 <or> 12 <or> 13", True), ("13", "<or> 11 <or> 12 <or> 13", True),
    ("12", "<or> 11 12", False),  # "12" is read as a keyword, as Nova does
    # an operator with nothing after it matches nothing
    ("1", ">=", False),
])
def test_operators(value: str, req: str, expected: bool) -> None:
    assert match(value, req) is expected


def test_numeric_operator_on_a_non_number_does_not_match() -> None:
    """Nova raises ValueError here (out of the scheduler); fleetcache fails the host."""
    assert match("fast", ">= 2") is False
    assert match("3", "= many") is False


def test_none_value_never_matches_an_operator_but_an_empty_spec_matches_none() -> None:
    assert match(None, "s== a") is False
    assert match(None, "<or> a <or> b") is False
    assert match(None, "a") is False
