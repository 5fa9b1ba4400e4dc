"""The metric names a PromQL expression reads, for checking dashboards and alert rules against what the
service exports. Not a PromQL parser: strings, label matchers, ranges and grouping clauses are dropped,
then every identifier not called as a function and not a keyword is a metric name."""

from __future__ import annotations

import re

__all__ = ["label_values_metric", "metric_names"]

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENTIFIER = re.compile(r"(?<![\w.$])[A-Za-z_:][\w:]*")
_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
)
_NUMBERS = frozenset({"inf", "nan"})
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*([A-Za-z_:][\w:]*)")


def metric_names(expr: str) -> set[str]:
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub("", _RANGE.sub("", text))
    text = _GROUPING.sub("", text)
    names = set()
    for match in _IDENTIFIER.finditer(text):
        word = match.group()
        if text[match.end() :].lstrip().startswith("("):
            continue  # a function (sum, rate, histogram_quantile, …)
        if word in _KEYWORDS or word.lower() in _NUMBERS:
            continue
        names.add(word)
    return names


def label_values_metric(query: str) -> str | None:
    """The metric of a Grafana ``label_values(metric{…}, label)`` variable query, if it is one."""
    match = _LABEL_VALUES.match(query)
    return match.group(1) if match else None
