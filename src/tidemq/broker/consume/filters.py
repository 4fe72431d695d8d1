"""What a consumer's FilterExpression asks for, made once per subscription: a tag filter (``a || b``,
``*``) for the store's tag-hash check, or a SQL92 property filter (tidemq/filter) for its ``match``.

Compiled filters are kept by expression text (FILTERS_CACHED_MAX, least recently used dropped):
the receives and pulls of one subscription parse it once, as RocketMQ's parse cache does. An
expression that does not parse is answered ILLEGAL_FILTER_EXPRESSION (the official code for it:
the client raises it as a bad request), with the position and why, before anything is read.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from ...filter.evaluate import SqlFilter
from ...filter.sql92 import FilterError
from ...protocol.stubs import Code, pb, status

FILTERS_CACHED_MAX = 1024


@dataclass(frozen=True)
class Subscription:
    """``tags``: the tags wanted (None: every message); ``match``: a property filter (None: none)."""
    tags: list[str] | None = None
    match: SqlFilter | None = None


EVERYTHING = Subscription()
_cache: "OrderedDict[str, SqlFilter | FilterError]" = OrderedDict()


def sql_filter(expression: str) -> SqlFilter:
    """The compiled filter of ``expression`` (cached); FilterError when it is not one."""
    got = _cache.get(expression)
    if got is None:
        try:
            got = SqlFilter(expression)
        except FilterError as e:
            got = e
        _cache[expression] = got
        if len(_cache) > FILTERS_CACHED_MAX:
            _cache.popitem(last=False)
    else:
        _cache.move_to_end(expression)
    if isinstance(got, FilterError):
        raise got
    return got


def tags_of(expression: str) -> list[str] | None:
    expr = expression.strip()
    if not expr or expr == "*":
        return None
    return [t.strip() for t in expr.split("||") if t.strip()] or None


def subscription(fe) -> "tuple[Subscription, None] | tuple[None, pb.Status]":
    """(the subscription a request's FilterExpression names, None) or (None, the refusal)."""
    if fe.type == pb.FilterType.SQL:
        try:
            f = sql_filter(fe.expression)
            # tags the expression requires (TAGS = 'a' AND ...): the tag hashes skip the rest unread
            if f.tags_only and f.tags:
                return Subscription(tags=sorted(f.tags)), None    # the tag check decides alone
            return Subscription(tags=sorted(f.tags) if f.tags else None, match=f), None
        except FilterError as e:
            return None, status(Code.ILLEGAL_FILTER_EXPRESSION, str(e))
    tags = tags_of(fe.expression)
    return (EVERYTHING if tags is None else Subscription(tags=tags)), None
