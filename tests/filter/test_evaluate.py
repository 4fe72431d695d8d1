"""The SQL92 evaluator against a reference evaluation: random expressions (built here as trees,
rendered to text, parsed by tidemq.filter) on random property maps, evaluated by the compiled
matcher on a stored record's property bytes and on a dict, and by a plain interpreter of RocketMQ's
rules written below from the Java classes (ComparisonExpression, LogicExpression,
UnaryExpression), independent of evaluate.py."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from tidemq.filter.evaluate import SqlFilter
from tidemq.record import codec

NAMES = ["a", "b", "TAGS", "region", "x_1"]
TEXTS = ["", "eu", "us", "5", "-3", "2.5", "1e2", "007", "true", "TRUE", "false", "abc", "10", "9999999999",
         "it's"]

# -- the reference: RocketMQ's rules, restated plainly ------------------------------------------------


def ref_num(s: str, want_int: bool):
    """Java's Long.valueOf / Double.valueOf on a property text, as far as the texts above go."""
    if want_int:
        return int(s) if re.fullmatch(r"[+-]?\d+", s) and -(1 << 63) <= int(s) < (1 << 63) else None
    return float(s) if re.fullmatch(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?)", s) else None


def ref_cmp(lv, rv):
    """__compare with convertStringExpressions; None stands for the exception (the comparison is unknown)."""
    if isinstance(lv, str) and not isinstance(rv, str):
        if isinstance(rv, bool):
            lv = lv.lower() == "true"
        else:
            lv = ref_num(lv, isinstance(rv, int))
            if lv is None:
                return None
    elif isinstance(rv, str) and not isinstance(lv, str):
        if isinstance(lv, bool):
            return None
        rv = ref_num(rv, isinstance(lv, int))
        if rv is None:
            return None
    elif isinstance(lv, bool) != isinstance(rv, bool):
        return -1
    return (lv > rv) - (lv < rv)


def ref(e, props):
    k = e[0]
    if k == "lit":
        return e[1]
    if k == "prop":
        return props.get(e[1])
    if k == "and":
        lv, rv = ref(e[1], props), ref(e[2], props)
        if lv is False or rv is False:
            return False
        return None if lv is None or rv is None else True
    if k == "or":
        lv, rv = ref(e[1], props), ref(e[2], props)
        if lv is True or rv is True:
            return True
        return None if lv is None or rv is None else False
    if k == "not":
        v = ref(e[1], props)
        return None if v is None else not v
    if k in ("=", "<>"):
        lv, rv = ref(e[1], props), ref(e[2], props)
        if lv is None and rv is None:
            r = True
        elif lv is None or rv is None:
            r = None if lv is None else False
        elif type(lv) is type(rv) and lv == rv:
            r = True
        else:
            c = ref_cmp(lv, rv)
            r = None if c is None else c == 0
        return r if k == "=" or r is None else not r
    if k in ("<", "<=", ">", ">="):
        lv, rv = ref(e[1], props), ref(e[2], props)
        if lv is None or rv is None:
            return None
        if isinstance(lv, str) and isinstance(rv, str):
            lv, rv = ref_num(lv, False), ref_num(rv, False)
            if lv is None or rv is None:
                return None
        c = ref_cmp(lv, rv)
        if c is None:
            return None
        return {"<": c < 0, "<=": c <= 0, ">": c > 0, ">=": c >= 0}[k]
    if k == "between":
        return ref(("and", (">=", e[1], e[2]), ("<=", e[1], e[3])), props)
    if k == "notbetween":
        return ref(("or", ("<", e[1], e[2]), (">", e[1], e[3])), props)
    if k == "isnull":
        return ref(e[1], props) is None
    if k == "notnull":
        return ref(e[1], props) is not None
    if k in ("in", "notin"):
        v = props.get(e[1])
        return None if v is None else (v in e[2]) == (k == "in")
    if k in ("contains", "notcontains"):
        v = ref(e[1], props)
        if not e[2] or v is None:
            return False
        return (e[2] in v) == (k == "contains")
    raise AssertionError(k)


def text(e) -> str:
    k = e[0]
    if k == "lit":
        v = e[1]
        if isinstance(v, bool):
            return "TRUE" if v else "FALSE"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return repr(v)
    if k == "prop":
        return e[1]
    if k in ("and", "or"):
        return f"({text(e[1])}) {k.upper()} ({text(e[2])})"
    if k == "not":
        return f"NOT ({text(e[1])})"
    if k in ("=", "<>", "<", "<=", ">", ">="):
        return f"{text(e[1])} {k} {text(e[2])}"
    if k in ("between", "notbetween"):
        return f"{text(e[1])} {'NOT ' if k == 'notbetween' else ''}BETWEEN {text(e[2])} AND {text(e[3])}"
    if k in ("isnull", "notnull"):
        return f"{text(e[1])} IS {'NOT ' if k == 'notnull' else ''}NULL"
    if k in ("in", "notin"):
        return f"{e[1]} {'NOT ' if k == 'notin' else ''}IN ({', '.join(text(('lit', s)) for s in e[2])})"
    if k in ("contains", "notcontains"):
        return f"{text(e[1])} {'NOT ' if k == 'notcontains' else ''}CONTAINS {text(('lit', e[2]))}"
    raise AssertionError(k)


# -- random expressions (only ones RocketMQ accepts) ----------------------------------------------
props_ = st.builds(lambda n: ("prop", n), st.sampled_from(NAMES))
number = st.one_of(st.integers(-20, 20), st.integers(-(1 << 40), 1 << 40),
                   st.floats(-100, 100, allow_nan=False).map(lambda f: round(f, 3)))
numlit = number.map(lambda v: ("lit", v))
strlit = st.sampled_from(TEXTS).map(lambda s: ("lit", s))
boollit = st.booleans().map(lambda b: ("lit", b))


def _between(p, lo, hi, neg):
    lo, hi = sorted((lo, hi))
    return ("notbetween" if neg else "between", p, ("lit", lo), ("lit", hi))


leaf = st.one_of(
    st.tuples(st.sampled_from(["=", "<>"]), props_, st.one_of(numlit, strlit, boollit, props_)),
    st.tuples(st.sampled_from(["<", "<=", ">", ">="]), props_, st.one_of(numlit, props_)),
    st.tuples(st.sampled_from(["<", "<=", ">", ">="]), numlit, props_),
    st.builds(_between, props_, number, number, st.booleans()),
    st.tuples(st.sampled_from(["isnull", "notnull"]), props_),
    st.tuples(st.sampled_from(["in", "notin"]), st.sampled_from(NAMES),
              st.lists(st.sampled_from(TEXTS), min_size=1, max_size=4).map(tuple)),
    st.tuples(st.sampled_from(["contains", "notcontains"]), props_, st.sampled_from(TEXTS)),
    boollit,
)
expressions = st.recursive(leaf, lambda inner: st.one_of(
    st.tuples(st.sampled_from(["and", "or"]), inner, inner), st.tuples(st.just("not"), inner)), max_leaves=8)
property_maps = st.dictionaries(st.sampled_from(NAMES), st.sampled_from(TEXTS), max_size=len(NAMES))


def stored(props: dict) -> codec.StoredMessage:
    raw = codec.encode_record(body=b"x", topic=b"T", properties=codec.encode_properties(
        {"KEYS": "k", **props, "UNIQ_KEY": "u"}), queue_id=0, queue_offset=0, physical_offset=0, born_timestamp_ms=0,
        born_host=bytes(8), store_timestamp_ms=0, store_host=bytes(8))
    return codec.decode_record(raw, 0, len(raw))


@settings(max_examples=400, deadline=None)
@given(expressions, property_maps)
def test_evaluator_agrees_with_the_reference(expr, props):
    src = text(expr)
    f = SqlFilter(src)
    want = ref(expr, props) is True
    assert f.matches_props(props) is want, src
    assert f.matches(stored(props)) is want, src


def test_a_stored_message_is_matched_without_decoding_its_property_dict():
    m = stored({"region": "eu", "amount": "150"})
    assert SqlFilter("region = 'eu' AND amount > 100").matches(m)
    assert m._props is None                     # the dict was never built


def test_missing_property_makes_comparison_and_its_negation_false():
    for e in ("a > 1", "NOT (a > 1)", "a = 'x'", "a <> 'x'", "a IN ('x')", "a NOT IN ('x')",
              "a BETWEEN 1 AND 2", "a NOT BETWEEN 1 AND 2"):
        assert not SqlFilter(e).matches_props({}), e
    assert SqlFilter("a IS NULL").matches_props({})
    assert SqlFilter("a IS NULL OR a > 1").matches_props({})


def test_tags_is_the_tag_and_keywords_ignore_case():
    assert SqlFilter("TAGS in ('A', 'B') and x is not null").matches_props({"TAGS": "B", "x": "1"})
    assert not SqlFilter("TAGS = 'A'").matches_props({"TAGS": "B"})
    assert SqlFilter("a = 'it''s'").matches_props({"a": "it's"})


def test_numbers_strings_and_booleans_convert_as_rocketmq_does():
    assert SqlFilter("a = 5").matches_props({"a": "5"})
    assert not SqlFilter("a = 5").matches_props({"a": "5.0"})    # Long.valueOf("5.0") fails
    assert SqlFilter("a = 5.0").matches_props({"a": "5"})
    assert SqlFilter("a > b").matches_props({"a": "10", "b": "9.5"})   # two texts compare as numbers
    assert not SqlFilter("a > b").matches_props({"a": "x", "b": "1"})
    assert SqlFilter("a = TRUE").matches_props({"a": "tRuE"})
    assert SqlFilter("a > -5 AND a < 5L").matches_props({"a": "-4"})
    assert SqlFilter("a > 1e2").matches_props({"a": "101"})


def test_precedence_and_comments():
    # AND binds tighter than OR; NOT binds tighter than comparisons (RocketMQ's grammar)
    assert SqlFilter("a = '1' OR a = '2' AND b = '3'").matches_props({"a": "1"})
    assert not SqlFilter("(a = '1' OR a = '2') AND b = '3'").matches_props({"a": "1"})
    assert SqlFilter("NOT a = 1 -- a comment\n OR TRUE /* another */").matches_props({"a": "1"})


def test_tags_a_match_requires_are_known_from_top_level_conjuncts():
    assert SqlFilter("TAGS = 'a' AND x > 1").tags == {"a"}
    assert SqlFilter("'a' = TAGS").tags == {"a"}
    assert SqlFilter("TAGS IN ('a', 'b') AND (TAGS = 'b' AND y = 'z')").tags == {"b"}
    assert SqlFilter("TAGS IN ('a', 'b') AND TAGS = 'c'").tags == frozenset()
    assert SqlFilter("TAGS = 'a'").tags_only and SqlFilter("TAGS IN ('a')").tags_only
    assert not SqlFilter("TAGS = 'a' AND x > 1").tags_only
    for none in ("TAGS = 'a' OR x > 1", "NOT (TAGS = 'a')", "TAGS NOT IN ('a')", "TAGS <> 'a'", "x = 1"):
        assert SqlFilter(none).tags is None, none


@settings(max_examples=200, deadline=None)
@given(expressions, property_maps)
def test_required_tags_never_exclude_a_match(expr, props):
    f = SqlFilter(text(expr))
    if f.tags is not None and f.matches_props(props):
        assert props.get("TAGS") in f.tags
