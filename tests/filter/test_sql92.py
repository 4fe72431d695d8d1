"""The SQL92 parser: what it accepts, what it refuses and where (positions), and its bounds."""

from __future__ import annotations

import pytest

from tidemq.filter import sql92
from tidemq.filter.sql92 import FilterError, parse


@pytest.mark.parametrize("expr, position", [
    ("a >", 3),                         # the end
    ("a > 'x'", 4),                     # strings cannot be ordered
    ("a = NULL", 2),
    ("5", 0),                           # not boolean
    ("a IN (1)", 6),                    # IN takes strings
    ("a BETWEEN 3 AND 1", 10),
    ("'abc", 0),
    ("a ^ b", 2),
    ("a = 1 b", 6),
    ("(a = 1", 6),
    ("a NOT LIKE 'x'", 2),
    ("TRUE = 'x'", 5),
    ("(a = 1) > 2", 8),
    ("1 IN ('x')", 2),
    ("", 0),
    ("a = 1 AND -a", 10),
])
def test_an_invalid_expression_is_refused_with_its_position(expr, position):
    with pytest.raises(FilterError) as e:
        parse(expr)
    assert e.value.position == position, str(e.value)
    assert f"position {position}" in str(e.value)


def test_nesting_and_length_are_bounded():
    with pytest.raises(FilterError):
        parse("(" * 1000 + "a" + ")" * 1000)
    with pytest.raises(FilterError):
        parse("NOT " * 1000 + "a")
    with pytest.raises(FilterError):
        parse("a = '" + "x" * sql92.EXPRESSION_CHARS_MAX + "'")
    with pytest.raises(FilterError):
        parse("a IN (" + ", ".join("'x'" for _ in range(sql92.IN_ITEMS_MAX + 1)) + ")")


def test_trees():
    assert parse("a <> 'x'") == ("not", ("cmp", "=", ("prop", "a"), ("const", "x")))
    assert parse("a not between 1 and 2") == ("or", ("cmp", "<", ("prop", "a"), ("const", 1)),
                                              ("cmp", ">", ("prop", "a"), ("const", 2)))
    assert parse("a is not null") == ("not", ("isnull", ("prop", "a")))
    assert parse("a") == ("cast", ("prop", "a"))
    assert parse("x IN ('a','b')") == ("in", "x", frozenset({"a", "b"}), False)
    assert parse("a > -5")[3] == ("const", -5)
    assert parse("a = 10L") == ("cmp", "=", ("prop", "a"), ("const", 10))
