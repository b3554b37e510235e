"""Connector options declared once: name, type, default, aliases and docs, for the source and the sink.

Keys are case-insensitive (as Spark's are); an alias maps to its option; an unknown key, a value of
the wrong type or a value outside the allowed ones fails at once, naming the option as the user wrote
it (alias and case included; as documented, in camelCase, when it was not given) and what it accepts.
The option tables of docs/options.md are tested against these declarations
(`tests/unit/test_option_table.py`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from staticmq_spark.backends.address import parse_address
from staticmq_spark.errors import InvalidOptionError
from staticmq_spark.protocol.security.auth import ClientSecurity, credentials_from_keys

SPARK_KEYS = frozenset({"path", "checkpointlocation", "queryname"})  # keys Spark itself may add
_DURATION = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000}


@dataclass(frozen=True, slots=True)
class Option:
    name: str  # as documented, camelCase
    kind: str  # "text", "positive", "bool", "duration", "choice"
    doc: str
    default: str | None = None
    aliases: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    required: bool = False

    def accepts(self) -> str:
        if self.kind == "choice":
            return " or ".join(self.choices)
        return {
            "positive": "a positive integer",
            "bool": "true or false",
            "duration": "a duration like 30s, 5m or 1500ms",
        }.get(self.kind, "text")


class OptionTable:
    """The options of one connector side; `parse` gives canonical names -> raw string values."""

    def __init__(self, side: str, options: list[Option]) -> None:
        self.side = side
        self.options = {o.name.lower(): o for o in options}
        self._keys = {alias.lower(): o.name.lower() for o in options for alias in (o.name, *o.aliases)}
        # the documented spelling of each name and alias: Spark lowercases option keys before a data
        # source sees them, so errors name the alias the user chose as it is documented
        self._spelling = {alias.lower(): alias for o in options for alias in (o.name, *o.aliases)}

    def describe(self) -> str:
        return ", ".join(f"{o.name} ({o.doc})" for o in self.options.values())

    def parse(self, raw: Mapping[str, Any]) -> ParsedOptions:
        given: dict[str, tuple[str, str]] = {}  # canonical -> (key as given, value)
        unknown = []
        for key, value in raw.items():
            lower = str(key).lower()
            if lower in SPARK_KEYS:
                continue
            canonical = self._keys.get(lower)
            if canonical is None:
                unknown.append(str(key))
                continue
            spelled = self._spelling[lower]
            if canonical in given:
                raise InvalidOptionError(
                    f"{self.side} options {given[canonical][0]!r} and {spelled!r} are the same option "
                    f"({self.options[canonical].name}): give one"
                )
            given[canonical] = (spelled, str(value))
        if unknown:
            raise InvalidOptionError(
                f"unknown staticmq {self.side} option(s) {sorted(unknown)}; accepted: {self.describe()}"
            )
        for option in self.options.values():
            if option.required and not given.get(option.name.lower(), ("", ""))[1].strip():
                raise InvalidOptionError(f"{self.side} option {option.name!r} is required: {option.doc}")
        return ParsedOptions(self, {k: v for k, (_, v) in given.items()}, {k: key for k, (key, _) in given.items()})


@dataclass(frozen=True)
class ParsedOptions:
    table: OptionTable
    values: dict[str, str]  # canonical (lower case) -> value given
    keys: dict[str, str]  # canonical (lower case) -> the name or alias the user gave, as documented

    def __contains__(self, name: str) -> bool:
        return name.lower() in self.values

    def _option(self, name: str) -> Option:
        return self.table.options[name.lower()]

    def raw(self, name: str) -> str | None:
        option = self._option(name)
        return self.values.get(name.lower(), option.default)

    def key(self, name: str) -> str:
        """The option as errors name it: the name or alias the user gave (in its documented
        spelling), else its documented name."""
        return self.keys.get(name.lower(), self._option(name).name)

    def error(self, name: str, problem: str) -> InvalidOptionError:
        return InvalidOptionError(f"{self.table.side} option {self.key(name)!r} {problem}")

    def text(self, name: str) -> str:
        value = self.raw(name)
        return "" if value is None else value

    def positive(self, name: str) -> int | None:
        value = self.raw(name)
        if value is None:
            return None
        try:
            number = int(value.strip())
        except ValueError:
            raise self.error(name, f"must be a positive integer, got {value!r}") from None
        if number <= 0:
            raise self.error(name, f"must be a positive integer, got {number}")
        return number

    def flag(self, name: str) -> bool:
        value = (self.raw(name) or "").strip().lower()
        if value not in ("true", "false"):
            raise self.error(name, f"must be true or false, got {self.raw(name)!r}")
        return value == "true"

    def duration_ms(self, name: str) -> int:
        value = self.raw(name) or ""
        match = _DURATION.match(value)
        if not match:
            raise self.error(name, f"must be a duration like 30s, 5m or 1500ms, got {value!r}")
        return int(match.group(1)) * _UNIT_MS[(match.group(2) or "ms").lower()]

    def choice(self, name: str) -> str | None:
        value = self.raw(name)
        if value is None:
            return None
        option = self._option(name)
        if value.strip().lower() not in option.choices:
            raise self.error(name, f"must be {option.accepts()}, got {value!r}")
        return value.strip().lower()


def cluster_address(opts: ParsedOptions) -> str:
    """The `namesrv` option, parsed once and normalised."""
    return str(parse_address(opts.text("namesrv")))


SECURITY_OPTIONS = (
    Option("accessKey", "text", "sign requests as this ACL account (rocketmq://: default $ROCKETMQ_ACCESS_KEY)"),
    Option("secretKey", "text", "the account's secret key (rocketmq://: default $ROCKETMQ_SECRET_KEY)"),
    Option("tlsCaFile", "text", "PEM file of the CA that signed the servers' TLS certificates: connect with TLS"),
)


def client_security(opts: ParsedOptions) -> ClientSecurity:
    """`accessKey`/`secretKey`/`tlsCaFile` as the ClientSecurity every connection of the query uses."""
    names = f"options {opts.key('accessKey')!r} and {opts.key('secretKey')!r}"
    credentials = credentials_from_keys(opts.text("accessKey"), opts.text("secretKey"), names)
    return ClientSecurity(credentials, opts.text("tlsCaFile") or None)
