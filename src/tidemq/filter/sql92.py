"""RocketMQ's SQL92 filter language: a tokenizer and a recursive-descent parser that turn an
expression into a small tree (tuples), checked as RocketMQ checks it at subscription time.

Why hand-written: the grammar is RocketMQ's ``filter/.../SelectorParser.jj`` (ActiveMQ's JMS
selector grammar without LIKE, arithmetic, hex and octal), a dozen rules with no ambiguity
beyond two-token look-ahead (``NOT BETWEEN``, ``NOT IN``, ``IS NOT NULL``). A parser of that size
is ~250 lines, has no dependency to pin, reports the character position of every error
itself, and lets us bound input length and nesting depth (a user's expression must never
exhaust the stack) where a library's generated parser would need wrapping for each.

Grammar (precedence from loosest; keywords case-insensitive; names case-sensitive)::

    or         := and ( OR and )*
    and        := equality ( AND equality )*
    equality   := comparison ( '=' comparison | '<>' comparison | IS NULL | IS NOT NULL )*
    comparison := unary ( '>' unary | '>=' unary | '<' unary | '<=' unary
                        | [NOT] BETWEEN unary AND unary | [NOT] IN '(' string (',' string)* ')'
                        | [NOT] CONTAINS string )*
    unary      := '+' unary | '-' unary | NOT unary | primary
    primary    := literal | name | '(' or ')'
    literal    := 'string' ('' is a quote) | integer (optional L) | decimal | TRUE | FALSE | NULL
    name       := [A-Za-z_$][A-Za-z0-9_$]*   (TAGS is the message's tag)

Note (as in RocketMQ) NOT binds tighter than comparisons: ``NOT a = 1`` is ``(NOT a) = 1``;
write ``NOT (a = 1)``. Comments ``-- ...`` and ``/* ... */`` are skipped.

Checks made here (an expression that fails one is refused: :class:`FilterError` with the
position): ``>``, ``>=``, ``<``, ``<=`` and BETWEEN take numbers or names, never a string,
boolean or NULL literal nor a boolean expression; ``=`` and ``<>`` never take NULL (use IS
NULL) nor a boolean literal against another literal; IN takes a name on its left; BETWEEN's
literal bounds are in order; the whole expression is boolean (a bare name is; a literal other
than TRUE, FALSE or NULL, or a negation, is not).

Tree nodes: ``("const", v)`` (v: None, bool, int, float or str), ``("prop", name)``,
``("neg", e)``, ``("not", e)``, ``("cast", e)`` (a name used as a boolean), ``("and", l, r)``,
``("or", l, r)``, ``("cmp", op, l, r)`` (op one of = > >= < <=), ``("isnull", e)``,
``("in", name, frozenset, negated)``, ``("contains", e, text, negated)``. ``<>`` is
``not(=)``, IS NOT NULL ``not(isnull)``, BETWEEN ``and(>=, <=)``, NOT BETWEEN ``or(<, >)``.
"""

from __future__ import annotations

import re

EXPRESSION_CHARS_MAX = 4096     # longer expressions are refused (RocketMQ has no bound)
DEPTH_MAX = 64                  # nesting of parentheses / unary operators
IN_ITEMS_MAX = 1024
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

KEYWORDS = frozenset(("NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS"))

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\n\r\f]+)
  | (?P<line>--[^\n\r]*(?:\r\n|\n|\r|$))
  | (?P<block>/\*[^*]*\*+(?:[^*/][^*]*\*+)*/)
  | (?P<float>[0-9]+\.[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
  | (?P<int>(?:0|[1-9][0-9]*)[lL]?)
  | (?P<str>'(?:''|[^'])*')
  | (?P<id>[A-Za-z_$][A-Za-z0-9_$]*)
  | (?P<op><>|>=|<=|[=<>(),+-])
""", re.VERBOSE)


class FilterError(ValueError):
    """An expression that cannot be a filter: ``position`` (0-based character offset) and why."""

    def __init__(self, position: int, why: str) -> None:
        super().__init__(f"invalid SQL92 filter at position {position}: {why}")
        self.position = position
        self.why = why


def tokenize(text: str) -> list[tuple[str, object, int]]:
    """(kind, value, position) per token, ending with ("end", None, len(text)). Kinds: kw (value
    upper-cased), id, int, float, str (unquoted), op."""
    out: list[tuple[str, object, int]] = []
    pos, n = 0, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            if text.startswith("'", pos):
                raise FilterError(pos, "a string is not closed (')")
            if text.startswith("/*", pos):
                raise FilterError(pos, "a comment is not closed (*/)")
            raise FilterError(pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup
        s = m.group()
        if kind == "int":
            if m.end() < n and (text[m.end()].isalnum() or text[m.end()] in "_$"):
                raise FilterError(pos, f"bad number {s + text[m.end()]!r}...")
            v = int(s.rstrip("lL"))
            if not INT64_MIN <= v <= INT64_MAX:
                raise FilterError(pos, f"{s} does not fit a 64-bit integer")
            out.append(("int", v, pos))
        elif kind == "float":
            v = float(s)
            if v != v or v in (float("inf"), float("-inf")):
                raise FilterError(pos, f"{s} is not a finite number")
            out.append(("float", v, pos))
        elif kind == "str":
            out.append(("str", s[1:-1].replace("''", "'"), pos))
        elif kind == "id":
            up = s.upper()
            out.append(("kw", up, pos) if up in KEYWORDS else ("id", s, pos))
        elif kind == "op":
            out.append(("op", s, pos))
        pos = m.end()
    out.append(("end", None, n))
    return out


def _is_boolean(node: tuple) -> bool:
    k = node[0]
    if k == "const":
        return node[1] is None or isinstance(node[1], bool)
    return k in ("not", "cast", "and", "or", "cmp", "isnull", "in", "contains")


def _describe(tok: tuple) -> str:
    kind, v, _ = tok
    if kind == "end":
        return "the end of the expression"
    if kind == "str":
        return f"'{v}'"
    return str(v)


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokenize(text)
        self.i = 0
        self.depth = 0

    # tokens -------------------------------------------------------------------------------
    def peek(self, k: int = 0) -> tuple:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def at(self, kind: str, value=None, k: int = 0) -> bool:
        t = self.peek(k)
        return t[0] == kind and (value is None or t[1] == value)

    def take(self) -> tuple:
        t = self.toks[self.i]
        self.i += 1
        return t

    def expect(self, kind: str, value=None, what: str = "") -> tuple:
        if not self.at(kind, value):
            t = self.peek()
            raise FilterError(t[2], f"expected {what or value or kind}, found {_describe(t)}")
        return self.take()

    def deeper(self, pos: int) -> None:
        self.depth += 1
        if self.depth > DEPTH_MAX:
            raise FilterError(pos, f"nested more than {DEPTH_MAX} deep")

    # checks (RocketMQ's at subscription time) --------------------------------------------------
    def boolean(self, node: tuple, pos: int) -> tuple:
        if _is_boolean(node):
            return node
        if node[0] == "prop":
            return ("cast", node)
        raise FilterError(pos, "this does not result in a boolean value")

    @staticmethod
    def orderable(node: tuple, pos: int) -> None:
        if node[0] == "const":
            v = node[1]
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                return
            raise FilterError(pos, f"{'NULL' if v is None else repr(v)} cannot be compared with <, <=, >, >= "
                                   "or BETWEEN (numbers only)")
        if _is_boolean(node):
            raise FilterError(pos, "a boolean expression cannot be compared with <, <=, >, >= or BETWEEN")

    @staticmethod
    def equatable(left: tuple, right: tuple, pos: int) -> None:
        for node in (left, right):
            if node[0] == "const" and node[1] is None:
                raise FilterError(pos, "NULL cannot be compared with = or <>: use IS NULL / IS NOT NULL")
        if left[0] == "const" and right[0] == "const" and isinstance(left[1], bool) \
                and not isinstance(right[1], bool):
            raise FilterError(pos, f"{left[1]!r} cannot be compared with {right[1]!r}")

    # grammar ---------------------------------------------------------------------------------
    def parse(self) -> tuple:
        pos = self.peek()[2]
        node = self.boolean(self.or_(), pos)
        if not self.at("end"):
            t = self.peek()
            raise FilterError(t[2], f"unexpected {_describe(t)}")
        return node

    def or_(self) -> tuple:
        pos = self.peek()[2]
        left = self.and_()
        while self.at("kw", "OR"):
            self.take()
            rpos = self.peek()[2]
            right = self.and_()
            left = ("or", self.boolean(left, pos), self.boolean(right, rpos))
        return left

    def and_(self) -> tuple:
        pos = self.peek()[2]
        left = self.equality()
        while self.at("kw", "AND"):
            self.take()
            rpos = self.peek()[2]
            right = self.equality()
            left = ("and", self.boolean(left, pos), self.boolean(right, rpos))
        return left

    def equality(self) -> tuple:
        left = self.comparison()
        while True:
            t = self.peek()
            if self.at("op", "=") or self.at("op", "<>"):
                self.take()
                right = self.comparison()
                self.equatable(left, right, t[2])
                left = ("cmp", "=", left, right) if t[1] == "=" else ("not", ("cmp", "=", left, right))
            elif self.at("kw", "IS"):
                self.take()
                if self.at("kw", "NOT"):
                    self.take()
                    self.expect("kw", "NULL", "NULL")
                    left = ("not", ("isnull", left))
                else:
                    self.expect("kw", "NULL", "NULL or NOT NULL")
                    left = ("isnull", left)
            else:
                return left

    def comparison(self) -> tuple:
        left = self.unary()
        while True:
            t = self.peek()
            if t[0] == "op" and t[1] in (">", ">=", "<", "<="):
                self.take()
                rpos = self.peek()[2]
                right = self.unary()
                self.orderable(left, t[2])
                self.orderable(right, rpos)
                left = ("cmp", t[1], left, right)
                continue
            negated = self.at("kw", "NOT") and self.peek(1)[0] == "kw" and self.peek(1)[1] in ("BETWEEN", "IN",
                                                                                               "CONTAINS")
            if negated:
                self.take()
                t = self.peek()
            if self.at("kw", "BETWEEN"):
                self.take()
                lo_pos = self.peek()[2]
                lo = self.unary()
                self.expect("kw", "AND", "AND")
                hi_pos = self.peek()[2]
                hi = self.unary()
                self.orderable(left, t[2])
                self.orderable(lo, lo_pos)
                self.orderable(hi, hi_pos)
                if lo[0] == "const" and hi[0] == "const" and hi[1] < lo[1]:
                    raise FilterError(lo_pos, f"BETWEEN {lo[1]} AND {hi[1]}: the first bound must not be "
                                              "greater than the second")
                left = (("or", ("cmp", "<", left, lo), ("cmp", ">", left, hi)) if negated else
                        ("and", ("cmp", ">=", left, lo), ("cmp", "<=", left, hi)))
            elif self.at("kw", "IN"):
                self.take()
                if left[0] != "prop":
                    raise FilterError(t[2], "IN needs a property name on its left")
                self.expect("op", "(", "(")
                items = [self.expect("str", what="a string literal")[1]]
                while self.at("op", ","):
                    self.take()
                    if len(items) >= IN_ITEMS_MAX:
                        raise FilterError(self.peek()[2], f"IN lists at most {IN_ITEMS_MAX} values")
                    items.append(self.expect("str", what="a string literal")[1])
                self.expect("op", ")", ")")
                left = ("in", left[1], frozenset(items), negated)
            elif self.at("kw", "CONTAINS"):
                self.take()
                s = self.expect("str", what="a string literal")[1]
                left = ("contains", left, s, negated)
            elif negated:
                raise FilterError(t[2], "expected BETWEEN, IN or CONTAINS after NOT")
            else:
                return left

    def unary(self) -> tuple:
        t = self.peek()
        if self.at("op", "+") or self.at("op", "-") or self.at("kw", "NOT"):
            self.take()
            self.deeper(t[2])
            inner_pos = self.peek()[2]
            inner = self.unary()
            self.depth -= 1
            if t[1] == "+":
                return inner
            if t[1] == "-":
                if inner[0] == "const" and isinstance(inner[1], (int, float)) and not isinstance(inner[1], bool):
                    return ("const", -inner[1])
                return ("neg", inner)
            return ("not", self.boolean(inner, inner_pos))
        return self.primary()

    def primary(self) -> tuple:
        t = self.take()
        kind, v, pos = t
        if kind in ("int", "float", "str"):
            return ("const", v)
        if kind == "kw" and v in ("TRUE", "FALSE", "NULL"):
            return ("const", None if v == "NULL" else v == "TRUE")
        if kind == "id":
            return ("prop", v)
        if kind == "op" and v == "(":
            self.deeper(pos)
            node = self.or_()
            self.depth -= 1
            self.expect("op", ")", ")")
            return node
        raise FilterError(pos, f"unexpected {_describe(t)}")


def parse(text: str) -> tuple:
    """The checked tree of a SQL92 filter expression; FilterError (with the position) when it is
    not one."""
    if not isinstance(text, str):
        raise FilterError(0, "the expression is not text")
    if len(text) > EXPRESSION_CHARS_MAX:
        raise FilterError(EXPRESSION_CHARS_MAX, f"longer than {EXPRESSION_CHARS_MAX} characters")
    if not text.strip():
        raise FilterError(0, "the expression is empty")
    return _Parser(text).parse()
