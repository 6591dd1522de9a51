"""Byte sizes as text, both ways, exactly as gpumem's TypeScript writes and reads them: the doctor's
figures and messages must read the same from ``python -m gpumem_torch doctor`` as from
``gpumem doctor`` (packages/allocator-core/src/format.ts and sizes.ts).

Only the standard library."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

MAX_SAFE_INTEGER = 2**53 - 1

SIZE_FORMS = "a non-negative integer, optionally followed by KiB, MiB, GiB or TiB (powers of 1024)"

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
_SHIFTS = {"": 1, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_PATTERN = re.compile(r"^([0-9]+)([A-Za-z]*)$")
_DECIMAL_LOOKING = re.compile(r"^([0-9]+)([KMGTkmgt])[Bb]?$")


def _to_fixed_2(value: float) -> str:
    """JavaScript's ``value.toFixed(2)``: the exact binary value rounded half away from zero (Python's
    format rounds ties to even: 1.125 would read 1.12 where gpumem writes 1.13)."""
    return str(Decimal(value).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


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


def _unit_hint(text: str) -> str:
    m = _DECIMAL_LOOKING.match(text)
    if not m:
        return ""
    binary = f"{m.group(1)}{m.group(2).upper()}iB"
    if int(m.group(1)) * _SHIFTS[m.group(2).lower() + "ib"] > MAX_SAFE_INTEGER:
        return ""  # never suggest a refused value
    return (
        f"; did you mean '{binary}'? gpumem sizes are binary (KiB, MiB, GiB, TiB: powers of 1024) "
        "and decimal units such as GB are not accepted"
    )


def parse_size(text: str, name: str = "size") -> int:
    """``1048576``, ``512MiB``, ``4gib`` as bytes. ValueError naming ``name`` for anything else: a
    sign, spaces, decimals (``16.5GiB``), decimal units (``4GB``), more than 2^53 - 1 bytes."""
    m = _PATTERN.match(text) if isinstance(text, str) and text.isascii() else None
    unit = _SHIFTS.get(m.group(2).lower()) if m else None
    if m is None or unit is None or int(m.group(1)) * unit > MAX_SAFE_INTEGER:
        received = f"'{text}'" if isinstance(text, str) else f"{text!r} of type {type(text).__name__}"
        hint = _unit_hint(text) if isinstance(text, str) else ""
        raise ValueError(f"Expected a size ({SIZE_FORMS}) for {name} but received {received}{hint}")
    return int(m.group(1)) * unit
