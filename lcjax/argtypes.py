"""argparse value types for numbers, shared by the `lcjax` command and the scripts.

Each is a plain function usable as `type=` in `add_argument`. On a bad value it raises
`argparse.ArgumentTypeError` with a message that quotes the value; argparse prefixes the
flag, so the error reads e.g. "argument --games: expected a positive integer, got '0'".
"""

from __future__ import annotations

import argparse
import math


def _int_at_least(text: str, least: int, wanted: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer > 0."""
    return _int_at_least(text, 1, "a positive integer")


def nonnegative_int(text: str) -> int:
    """An integer >= 0."""
    return _int_at_least(text, 0, "an integer >= 0")


def positive_float(text: str) -> float:
    """A finite number > 0."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def positive_int_list(text: str) -> list[int]:
    """Comma-separated integers > 0, e.g. "512,1024" -> [512, 1024]."""
    values = []
    for part in text.split(","):
        try:
            values.append(positive_int(part.strip()))
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated positive integers such as 512,1024, got {text!r} "
                f"({part.strip()!r} is not a positive integer)"
            ) from None
    return values
