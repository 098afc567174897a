"""Metadata filters for retrieval: parsed, validated, pushed down to Chroma where it can.

A filter is a mapping of metadata key to condition, all ANDed:
``{"lang": "zh"}`` (exact), ``{"source": ["xquad", "cmrc2018"]}`` (any of),
``{"year": {">=": 2020}}``, ``{"title": {"contains": "Tesla"}}``, ``{"lang": {"not_in": ["en"]}}``.
Operators: ``=``, ``>``, ``>=``, ``<``, ``<=``, ``in``, ``not_in``, ``contains``. Chroma
evaluates equality, membership and numeric comparisons; string comparisons (ISO dates) and
``contains`` run after retrieval, on an over-fetched candidate list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

Scalar = str | int | float | bool
OPERATORS = ("=", ">", ">=", "<", "<=", "in", "not_in", "contains")
_CHROMA = {
    "=": "$eq",
    ">": "$gt",
    ">=": "$gte",
    "<": "$lt",
    "<=": "$lte",
    "in": "$in",
    "not_in": "$nin",
}
_EXPRESSION_RE = re.compile(
    r"^\s*(?P<key>[A-Za-z_][\w.-]*)\s*(?:(?P<symbol>>=|<=|!=|=|>|<)|\s(?P<word>in|not_in|contains)\s)"
    r"\s*(?P<value>.*?)\s*$"
)


class FilterError(ValueError):
    """A filter that cannot be applied: unknown operator or a value of the wrong type."""


@dataclass(frozen=True)
class Condition:
    key: str
    op: str
    value: Any

    def matches(self, metadata: dict[str, Any]) -> bool:
        if self.key not in metadata:
            return self.op == "not_in"
        actual = metadata[self.key]
        if self.op == "=":
            return actual == self.value
        if self.op == "in":
            return actual in self.value
        if self.op == "not_in":
            return actual not in self.value
        if self.op == "contains":
            return isinstance(actual, str) and self.value.lower() in actual.lower()
        if isinstance(actual, bool) or not _comparable(actual, self.value):
            return False
        return {
            ">": actual > self.value,
            ">=": actual >= self.value,
            "<": actual < self.value,
            "<=": actual <= self.value,
        }[self.op]

    @property
    def pushable(self) -> bool:
        """Chroma compares numbers only; strings and substrings are filtered afterwards."""
        if self.op == "contains":
            return False
        if self.op in (">", ">=", "<", "<="):
            return isinstance(self.value, int | float)
        return True


def _comparable(actual: Any, expected: Any) -> bool:
    numbers = int | float
    return (isinstance(actual, numbers) and isinstance(expected, numbers)) or (
        isinstance(actual, str) and isinstance(expected, str)
    )


def _check(key: str, op: str, value: Any) -> Condition:
    if op not in OPERATORS:
        raise FilterError(f"unknown filter operator {op!r} for {key!r}; use {', '.join(OPERATORS)}")
    if op in ("in", "not_in"):
        if (
            not isinstance(value, list)
            or not value
            or not all(isinstance(v, Scalar) for v in value)
        ):
            raise FilterError(f"filter {key} {op} needs a non-empty list of values")
        return Condition(key, op, list(value))
    if op == "contains" and not isinstance(value, str):
        raise FilterError(f"filter {key} contains needs a string")
    if op in (">", ">=", "<", "<=") and (
        isinstance(value, bool) or not isinstance(value, int | float | str)
    ):
        raise FilterError(f"filter {key} {op} needs a number or a string (e.g. a date)")
    if not isinstance(value, Scalar):
        raise FilterError(f"filter {key} {op} needs a string, number or boolean")
    return Condition(key, op, value)


def parse_filters(spec: dict[str, Any] | None) -> list[Condition]:
    """Validate the mapping form into conditions (raises :class:`FilterError`)."""
    conditions: list[Condition] = []
    for key, condition in (spec or {}).items():
        if isinstance(condition, dict):
            if not condition:
                raise FilterError(f"filter {key!r} has no operator")
            conditions += [_check(key, op, value) for op, value in condition.items()]
        elif isinstance(condition, list):
            conditions.append(_check(key, "in", condition))
        else:
            conditions.append(_check(key, "=", condition))
    return conditions


def _scalar(text: str) -> Scalar:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


def parse_expression(expression: str) -> dict[str, Any]:
    """One CLI ``--filter`` (``lang=zh``, ``year>=2020``, ``source in a,b``) as a mapping."""
    match = _EXPRESSION_RE.match(expression)
    if not match:
        raise FilterError(
            f"cannot parse filter {expression!r}; use KEY=VALUE, KEY>VALUE, 'KEY in A,B', …"
        )
    key, raw = match["key"], match["value"]
    op = match["symbol"] or match["word"]
    if op == "!=":
        return {key: {"not_in": [_scalar(raw)]}}
    if op in ("in", "not_in"):
        value: Any = [_scalar(part.strip()) for part in raw.split(",") if part.strip()]
    else:
        value = _scalar(raw) if op != "contains" else raw
    return {key: {op: value}}


def chroma_where(conditions: list[Condition]) -> dict[str, Any] | None:
    clauses = [{c.key: {_CHROMA[c.op]: c.value}} for c in conditions if c.pushable]
    if not clauses:
        return None
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


def post_filter(conditions: list[Condition]) -> list[Condition]:
    return [c for c in conditions if not c.pushable]
