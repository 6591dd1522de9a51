"""Byte sizes as text, both ways, exactly as gpumem's TypeScript writes and reads them: the doctor's
figures and messages must read the same from ``python -m gpumem_torch doctor`` as from
``gpumem doctor`` (packages/allocator-core/src/format.ts and sizes.ts).

Only the standard library."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

MAX_SAFE_INTEGER = 2**53 - 1

SIZE_FORMS = (
    "a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024; with a unit, a decimal fraction "
    "such as 16.5GiB, rounded down to whole bytes)"
)

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SHIFTS = {"": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
# digits, a fraction, one space, a unit: the fraction and the space only with a unit (checked below)
_PATTERN = re.compile(r"^([0-9]+)(?:\.([0-9]{1,64}))?( ?)([A-Za-z]*)$")  # 64 fraction digits at most, as in C++
_DECIMAL_LOOKING = re.compile(r"^([0-9]+(?:\.[0-9]+)?)( ?)([KMGTkmgt])[Bb]?$")


def _to_fixed_2(value: float) -> str:
    """JavaScript's ``value.toFixed(2)``: the exact binary value rounded half away from zero (Python's
    format rounds ties to even: 1.125 would read 1.12 where gpumem writes 1.13)."""
    return str(Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def to_fixed_2(value: float) -> str:
    """JavaScript's ``value.toFixed(2)`` (the doctor's percentages)."""
    return _to_fixed_2(value)


def format_bytes(count: int) -> str:
    """``1.50 GiB``, ``512 B``: formatBytes of @gpumem/allocator-core."""
    value = float(count)
    unit = 0
    while abs(value) >= 1024 and unit < len(_UNITS) - 1:
        value /= 1024
        unit += 1
    if unit == 0:
        return f"{int(count) if float(count).is_integer() else count} B"
    return f"{_to_fixed_2(value)} {_UNITS[unit]}"


def _exact_bytes(text: str) -> "int | None":
    """The bytes ``text`` stands for, rounded down; None where it is not one of the forms or is above 2^53 - 1."""
    m = _PATTERN.match(text) if text.isascii() else None
    if m is None:
        return None
    whole, fraction, space, suffix = m.group(1), m.group(2) or "", m.group(3), m.group(4)
    unit = _SHIFTS.get(suffix.lower())
    if unit is None or (unit == 1 and (fraction != "" or space != "")):  # a fraction of a byte, "1 "
        return None
    if len(whole.lstrip("0")) > 20:  # past 2^53 whatever the unit (and past what int() reads at once)
        return None
    count = int((whole + fraction).lstrip("0") or "0") * unit // 10 ** len(fraction)  # exact: (whole.fraction * unit) rounded down
    return count if count <= MAX_SAFE_INTEGER else None


def _unit_hint(text: str) -> str:
    m = _DECIMAL_LOOKING.match(text)
    if not m:
        return ""
    binary = f"{m.group(1)}{m.group(2)}{m.group(3).upper()}iB"
    if _exact_bytes(binary) is None:
        return ""  # never suggest a refused value
    return (
        f"; did you mean '{binary}'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) "
        "and decimal units such as GB are not accepted"
    )


def parse_size(text: str, name: str = "size") -> int:
    """``1048576``, ``512MiB``, ``4gib``, ``16.5GiB``, ``0.5 GiB`` as bytes (a fraction rounded down),
    as parseSize of @gpumem/allocator-core. ValueError naming ``name`` for anything else: a sign,
    other spaces, a fraction of a byte, decimal units (``4GB``), more than 2^53 - 1 bytes."""
    count = _exact_bytes(text) if isinstance(text, str) else None
    if count is None:
        received = f"'{text}'" if isinstance(text, str) else f"{text!r} of type {type(text).__name__}"
        hint = _unit_hint(text) if isinstance(text, str) else ""
        raise ValueError(f"Expected a size ({SIZE_FORMS}) for {name} but received {received}{hint}")
    return count
