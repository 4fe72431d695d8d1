"""A parsed SQL92 filter (sql92.py) made into a matcher: closures built once per expression,
run per message on the few properties the expression names, read from the record's stored
property bytes (codec.prop_value) without building the message's property dict.

Semantics (RocketMQ's ``filter/expression``, with string conversion on, as its parser sets it):

- a property's value is its text, or NULL when the message does not have it; ``TAGS`` is the tag;
- ``=``: NULL on one side only is NULL (unknown) or false; otherwise equal values, or values equal
  once converted: a text against a number is read as that number, a text against TRUE/FALSE is
  true when it is ``true`` in any case; numbers compare by value;
- ``>``, ``>=``, ``<``, ``<=``: NULL on either side is NULL; two texts are both read as numbers; a
  text against a number is read as that number;
- a text that is not a number where one is needed makes that comparison NULL. (RocketMQ throws,
  which makes the whole expression false whatever else it says; we keep it local);
- NOT, AND, OR are three-valued (NULL is unknown); a message matches only when the whole is TRUE,
  so a missing property makes a comparison on it, and its negation, fail;
- IN / NOT IN: NULL when the property is missing; CONTAINS / NOT CONTAINS: false when it is;
- a bare name used as a boolean (``a AND b``) is false (a property is text, never a boolean), NULL
  when missing.

A text is an integer when it is ``[+-]digits`` within 64 bits, a decimal when it is
``[+-]digits[.digits][e[+-]digits]`` (or starts with the point). Integers are 64-bit throughout
(RocketMQ reads a text compared with a small constant as a 32-bit Integer and fails past it).
"""

from __future__ import annotations

import re
from typing import Callable

from ..record.codec import prop_name, prop_value, seek_properties
from .sql92 import INT64_MAX, INT64_MIN, parse

_INT = re.compile(r"[+-]?[0-9]+")
_DEC = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?)")
NOT_A_NUMBER = object()        # a conversion that failed (the comparison is NULL)


def as_int(s: str):
    if _INT.fullmatch(s) is None:
        return NOT_A_NUMBER
    v = int(s)
    return v if INT64_MIN <= v <= INT64_MAX else NOT_A_NUMBER


def as_float(s: str):
    if _DEC.fullmatch(s) is None:
        return NOT_A_NUMBER
    v = float(s)
    return v if v not in (float("inf"), float("-inf")) else NOT_A_NUMBER


def _kind(v) -> str:
    t = type(v)
    return "bool" if t is bool else "int" if t is int else "float" if t is float else "str"


def compare(lv, rv):
    """-1, 0 or 1 as RocketMQ's ComparisonExpression.__compare (string conversion on); None when
    a text cannot be read as the number it is compared with. ``lv`` and ``rv`` are not None."""
    lk, rk = _kind(lv), _kind(rv)
    if lk != rk:
        if lk == "bool":
            return None if rk == "str" else -1     # (RocketMQ: a ClassCastException, the expression fails)
        if lk in ("int", "float"):
            if rk == "str":
                rv = as_int(rv) if lk == "int" else as_float(rv)
                if rv is NOT_A_NUMBER:
                    return None
            elif rk == "bool":
                return -1
        elif lk == "str":
            if rk == "bool":
                lv = lv.lower() == "true"
            else:
                lv = as_int(lv) if rk == "int" else as_float(lv)
                if lv is NOT_A_NUMBER:
                    return None
    return (lv > rv) - (lv < rv)


def _eq(lv, rv):
    if (lv is None) != (rv is None):
        return None if lv is None else False
    if lv is None or (type(lv) is type(rv) and lv == rv):
        return True
    c = compare(lv, rv)
    return None if c is None else c == 0


_ORDER = {">": lambda c: c > 0, ">=": lambda c: c >= 0, "<": lambda c: c < 0, "<=": lambda c: c <= 0}


def _order(op: str, lv, rv):
    if lv is None or rv is None:
        return None
    if type(lv) is str and type(rv) is str:
        lv, rv = as_float(lv), as_float(rv)
        if lv is NOT_A_NUMBER or rv is NOT_A_NUMBER:
            return None
    c = compare(lv, rv)
    return None if c is None else _ORDER[op](c)


def names_of(node: tuple, out: list[str]) -> list[str]:
    """The property names a tree reads, each once, in order of first use."""
    k = node[0]
    if k == "prop":
        if node[1] not in out:
            out.append(node[1])
    elif k == "in":
        if node[1] not in out:
            out.append(node[1])
    else:
        for child in node[1:]:
            if isinstance(child, tuple):
                names_of(child, out)
    return out


def build(node: tuple, slot: dict[str, int]) -> Callable[[list], object]:
    """A closure evaluating ``node`` over ``vals`` (the property values, by ``slot[name]``)."""
    k = node[0]
    if k == "const":
        v = node[1]
        return lambda vals: v
    if k == "prop":
        i = slot[node[1]]
        return lambda vals: vals[i]
    if k == "neg":
        f = build(node[1], slot)

        def neg(vals):
            v = f(vals)
            return -v if type(v) in (int, float) else None
        return neg
    if k == "not":
        f = build(node[1], slot)

        def not_(vals):
            v = f(vals)
            return None if v is None else not v
        return not_
    if k == "cast":
        f = build(node[1], slot)

        def cast(vals):
            v = f(vals)
            return None if v is None else (v if type(v) is bool else False)
        return cast
    if k == "and":
        fl, fr = build(node[1], slot), build(node[2], slot)

        def and_(vals):
            lv = fl(vals)
            if lv is False:
                return False
            rv = fr(vals)
            if rv is False:
                return False
            return None if lv is None or rv is None else True
        return and_
    if k == "or":
        fl, fr = build(node[1], slot), build(node[2], slot)

        def or_(vals):
            lv = fl(vals)
            if lv is True:
                return True
            rv = fr(vals)
            if rv is True:
                return True
            return None if lv is None or rv is None else False
        return or_
    if k == "cmp":
        op = node[1]
        fl, fr = build(node[2], slot), build(node[3], slot)
        if op == "=":
            if node[2][0] == "prop" and node[3][0] == "const" and type(node[3][1]) is str:
                i, want = slot[node[2][1]], node[3][1]       # the common case: name = 'text'
                return lambda vals: None if vals[i] is None else vals[i] == want
            return lambda vals: _eq(fl(vals), fr(vals))
        return lambda vals: _order(op, fl(vals), fr(vals))
    if k == "isnull":
        f = build(node[1], slot)
        return lambda vals: f(vals) is None
    if k == "in":
        i, items, negated = slot[node[1]], node[2], node[3]
        return lambda vals: None if vals[i] is None else (vals[i] in items) != negated
    if k == "contains":
        f, text, negated = build(node[1], slot), node[2], node[3]

        def contains(vals):
            v = f(vals)
            if not text or type(v) is not str:
                return False
            return (text in v) != negated
        return contains
    raise AssertionError(f"unknown node {k!r}")


def required_tags(node: tuple) -> frozenset | None:
    """The tags a message must have for ``node`` to be TRUE, when a top-level conjunct says so
    (``TAGS = 'a'``, ``TAGS IN ('a', 'b')``); None when it does not. The consume queue's tag hashes
    then skip the others before any record is read, as a tag filter does."""
    k = node[0]
    if k == "and":
        left, right = required_tags(node[1]), required_tags(node[2])
        if left is None:
            return right
        return left if right is None else left & right
    if k == "cmp" and node[1] == "=":
        for a, b in ((node[2], node[3]), (node[3], node[2])):
            if a == ("prop", "TAGS") and b[0] == "const" and type(b[1]) is str:
                return frozenset((b[1],))
    if k == "in" and node[1] == "TAGS" and not node[3]:
        return node[2]
    return None


class SqlFilter:
    """A SQL92 expression compiled once: ``matches(message)`` on a stored message (its record's
    properties read in place), ``matches_props(dict)`` on a property dict."""

    __slots__ = ("expression", "names", "tags", "tags_only", "_keys", "_eval")

    def __init__(self, expression: str) -> None:
        tree = parse(expression)
        self.expression = expression
        self.tags = required_tags(tree)          # a message without one of these never matches
        # nothing but a test of the tag (TAGS = 'a', TAGS IN (...)): the tag check alone decides
        self.tags_only = self.tags is not None and (tree[0] == "in" or tree[0] == "cmp")
        self.names = tuple(names_of(tree, []))
        self._keys = tuple(prop_name(n) for n in self.names)
        self._eval = build(tree, {n: i for i, n in enumerate(self.names)})

    def matches_props(self, props) -> bool:
        return self._eval([props.get(n) for n in self.names]) is True

    def matches(self, m) -> bool:
        raw = getattr(m, "properties_raw", None)
        if raw is None:                              # not a stored message: its dict
            return self.matches_props(m.properties)
        props = seek_properties(raw())
        return self._eval([prop_value(props, k) for k in self._keys]) is True

    __call__ = matches
