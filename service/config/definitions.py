"""What a configuration key is: Kafka's ``ConfigDef`` in Python, its types, validators and parsing.

Each :class:`ConfigDef` row holds a broker key, its type, Kafka's default, the validator, a one-line doc,
the topic-level name it is the default for (Kafka's "synonym") and the lower-precedence broker keys it
falls back to (``log.retention.ms`` → ``.minutes`` → ``.hours``). The rows themselves are declared once,
each beside the ``BrokerConfig`` field that holds its value (``broker_config.CONFIG_DEFS``).
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass
from typing import Literal

from service.base.errors import InvalidInputError
from service.storage.log_config import LONG_MAX

__all__ = [
    "SPARK_PREFIX",
    "ConfigDef",
    "ConfigSource",
    "ConfigType",
    "ConfigValue",
    "InvalidConfigError",
    "Range",
    "RawValue",
    "ValidList",
    "ValidPattern",
    "ValidString",
    "Validator",
    "describe_allowed",
    "format_value",
    "parse_value",
]

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN = -(1 << 63)
SPARK_PREFIX = "spark."
# log.cleaner.spark.min.bytes: the round size from which Spark may beat in-process (docs/cleaner.md: why)
SPARK_MIN_BYTES_DEFAULT = 16 << 30
# log.cleaner.spark.max.logs.per.job: how many logs one Spark job cleans together (docs/performance.md)
SPARK_MAX_LOGS_PER_JOB_DEFAULT = 8

ConfigValue = int | float | bool | str | tuple[str, ...]
"""A parsed value: INT/LONG → int, DOUBLE → float, BOOLEAN → bool, STRING → str, LIST → tuple."""
RawValue = str | int | float | bool
"""A value as it arrives: a string from a properties file, a string or a number from the API."""
ConfigSource = Literal[
    "default", "broker", "broker-dynamic", "internal-topic-default", "metadata", "override", "unknown"
]
"""Where an effective topic config value came from (``config_layers``: the order, highest last here)."""


class ConfigType(enum.Enum):
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    STRING = "STRING"
    LIST = "LIST"


@dataclass(frozen=True, slots=True)
class Range:
    """Numbers in ``[min, max]``; ``None`` leaves that end open (Kafka ``Range.atLeast``/``between``)."""

    min: int | float | None = None
    max: int | float | None = None


@dataclass(frozen=True, slots=True)
class ValidString:
    """One of ``allowed``, case-sensitive as Kafka's ``ValidString.in``."""

    allowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidList:
    """A non-empty list whose items are each one of ``allowed`` (Kafka ``ValidList.in``)."""

    allowed: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ValidPattern:
    """A list (possibly empty) whose items each match ``pattern``, described to users as ``description``."""

    pattern: str
    description: str


Validator = Range | ValidString | ValidList | ValidPattern


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One key. ``default=None`` means unset (the key falls back to its ``synonyms`` in order).

    ``topic_validator`` is set only where the topic key is stricter than the broker key: Kafka accepts
    any negative ``log.retention.ms`` (as unlimited) but only ``retention.ms >= -1``.
    """

    name: str
    type: ConfigType
    default: ConfigValue | None
    doc: str
    validator: Validator | None = None
    topic_name: str | None = None
    synonyms: tuple[str, ...] = ()
    topic_validator: Validator | None = None

    @property
    def attribute(self) -> str:
        """The Python attribute name: the key with ``.`` → ``_``."""
        return self.name.replace(".", "_")

    def validator_for(self, *, topic: bool) -> Validator | None:
        return self.topic_validator if topic and self.topic_validator is not None else self.validator


_INTEGER = re.compile(r"[+-]?[0-9]+")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TYPE_BOUNDS = {ConfigType.INT: (INT_MIN, INT_MAX), ConfigType.LONG: (LONG_MIN, LONG_MAX)}
_LONG_DIGITS = len(str(LONG_MAX))
_SHOWN_MAX_BITS = 256
_SHOWN_MAX_CHARS = 80


class InvalidConfigError(InvalidInputError):
    """A config value or name that is not allowed; ``name`` and ``value`` say which.

    Fix: change the value in the config file, the ``--override`` or the request to one of ``allowed``.
    """

    def __init__(self, message: str, *, name: str, value: object) -> None:
        super().__init__(message)
        self.name = name
        self.value = value


def describe_allowed(defn: ConfigDef, *, topic: bool = False) -> str:
    """What the key accepts, in words, for error messages and docs."""
    validator = defn.validator_for(topic=topic)
    if isinstance(validator, ValidString):
        return "one of " + ", ".join(validator.allowed)
    if isinstance(validator, ValidList):
        return "a non-empty comma-separated list of " + ", ".join(validator.allowed)
    if isinstance(validator, ValidPattern):
        return "a comma-separated list of " + validator.description
    if defn.type in _TYPE_BOUNDS:
        low, high = _TYPE_BOUNDS[defn.type]
        if isinstance(validator, Range):
            low = int(validator.min) if validator.min is not None else low
            high = int(validator.max) if validator.max is not None else high
        return f"an integer in [{low}, {high}]"
    if defn.type is ConfigType.DOUBLE:
        if isinstance(validator, Range) and validator.min is not None and validator.max is not None:
            return f"a number in [{validator.min}, {validator.max}]"
        return "a finite number"
    if defn.type is ConfigType.BOOLEAN:
        return "true or false"
    return "a string"


def parse_value(defn: ConfigDef, raw: RawValue, *, topic: bool = False) -> ConfigValue:
    """Parse and validate ``raw`` as Kafka's ``ConfigDef.parseType`` + validator would.

    Strings are trimmed; numbers may arrive as JSON numbers. ``topic=True`` names the topic key in errors
    and applies the topic validator. Raises :class:`InvalidConfigError` naming key, value and what is allowed.
    """
    name = defn.topic_name if topic and defn.topic_name else defn.name
    value = _parse_type(defn.type, raw)
    if value is not None:
        problem = _check(defn.validator_for(topic=topic), value)
    elif defn.type in _TYPE_BOUNDS and _is_integer(raw):
        problem = f"out of the range of Kafka's {defn.type.value} type"
    else:
        problem = f"not a {_TYPE_WORDS[defn.type]}"
    if problem is None and value is not None:
        return value
    shown = _shown(raw)
    allowed = describe_allowed(defn, topic=topic)
    raise InvalidConfigError(
        f"Invalid value {shown} for configuration {name}: {problem}; allowed: {allowed}",
        name=name,
        value=raw,
    )


def format_value(value: ConfigValue) -> str:
    """The Kafka string form of a parsed value; ``parse_value`` reads it back unchanged."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return repr(value) if isinstance(value, float) else str(value)


_TYPE_WORDS = {
    ConfigType.INT: "number of type INT",
    ConfigType.LONG: "number of type LONG",
    ConfigType.DOUBLE: "finite number of type DOUBLE",
    ConfigType.BOOLEAN: "boolean (true or false)",
    ConfigType.STRING: "string",
    ConfigType.LIST: "comma-separated list",
}


def _is_integer(raw: RawValue) -> bool:
    if isinstance(raw, bool):
        return False
    return isinstance(raw, int) or (isinstance(raw, str) and _INTEGER.fullmatch(raw.strip()) is not None)


def _shown(raw: RawValue) -> str:
    """``raw`` for a message: strings quoted, booleans as Kafka writes them, huge numbers abridged (Python
    refuses to print an int of over 4300 digits, and a message of thousands of digits helps no one)."""
    if isinstance(raw, bool):
        return str(raw).lower()
    if isinstance(raw, int):
        if raw.bit_length() <= _SHOWN_MAX_BITS:
            return str(raw)
        return f"<an integer of about {int(raw.bit_length() * math.log10(2)) + 1} digits>"
    if not isinstance(raw, str):
        return str(raw)
    text = repr(raw)
    return text if len(text) <= _SHOWN_MAX_CHARS else f"{text[:_SHOWN_MAX_CHARS]}... ({len(raw)} characters)"


def _parse_type(config_type: ConfigType, raw: RawValue) -> ConfigValue | None:
    """The typed value, or ``None`` when ``raw`` is not of ``config_type`` or out of its range."""
    if config_type in _TYPE_BOUNDS:
        number: int | None = None
        if isinstance(raw, int) and not isinstance(raw, bool):
            number = raw
        elif isinstance(raw, str) and _INTEGER.fullmatch(raw.strip()):
            text = raw.strip()
            digits = text.lstrip("+-").lstrip("0") or "0"
            # Past 19 digits it is out of any Kafka range; int() would refuse past 4300 characters anyway.
            number = (
                int(text[0] + digits if text[0] in "+-" else digits) if len(digits) <= _LONG_DIGITS else None
            )
        low, high = _TYPE_BOUNDS[config_type]
        return number if number is not None and low <= number <= high else None
    if config_type is ConfigType.DOUBLE:
        real: float | None = None
        try:
            if isinstance(raw, (int, float)) and not isinstance(raw, bool):
                real = float(raw)
            elif isinstance(raw, str) and _DECIMAL.fullmatch(raw.strip()):
                real = float(raw.strip())
        except OverflowError:  # an int beyond the largest float
            real = None
        return real if real is not None and math.isfinite(real) else None
    if config_type is ConfigType.BOOLEAN:
        if isinstance(raw, bool):
            return raw
        text = raw.strip().lower() if isinstance(raw, str) else ""
        return {"true": True, "false": False}.get(text)
    if not isinstance(raw, str):
        return None
    if config_type is ConfigType.LIST:  # Kafka's csvList: split on commas, trim, drop empty items
        items = (item.strip() for item in raw.split(","))
        return tuple(dict.fromkeys(item for item in items if item))
    return raw.strip()


def _check(validator: Validator | None, value: ConfigValue) -> str | None:
    """Why ``value`` breaks ``validator`` (Kafka's wording), or ``None`` if it does not."""
    if isinstance(validator, Range) and isinstance(value, (int, float)):
        if validator.min is not None and value < validator.min:
            return f"value must be at least {validator.min}"
        if validator.max is not None and value > validator.max:
            return f"value must be no more than {validator.max}"
    elif isinstance(validator, ValidString) and value not in validator.allowed:
        return "not an allowed value (names are case-sensitive)"
    elif isinstance(validator, ValidList) and isinstance(value, tuple):
        if not value:
            return "the list must not be empty"
        unknown = [item for item in value if item not in validator.allowed]
        if unknown:
            return f"{unknown[0]!r} is not an allowed item"
    elif isinstance(validator, ValidPattern) and isinstance(value, tuple):
        wrong = [item for item in value if not re.fullmatch(validator.pattern, item)]
        if wrong:
            return f"{wrong[0]!r} is not one of the {validator.description}"
    return None
