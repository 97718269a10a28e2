"""Number types for the command lines' options: a bad value is refused by argparse with a
message that names it and the range expected ("'0': expected a number > 0"), never let through
to fail later or be read as something else."""

from __future__ import annotations

import argparse
from typing import Callable


def number(kind: type = float, *, above: float | None = None, at_least: float | None = None,
           below: float | None = None, what: str | None = None) -> Callable[[str], float]:
    """An argparse ``type``: ``kind`` (int or float) of ``text`` within the bounds given;
    ``what`` names the quantity in the error ("minutes"), by default "a number"."""
    noun = what or ("a whole number" if kind is int else "a number")
    bounds = [f"> {above:g}" if above is not None else "", f">= {at_least:g}" if at_least is not None else "",
              f"< {below:g}" if below is not None else ""]
    expected = f"{noun} {' and '.join(b for b in bounds if b)}".strip()

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or (above is not None and not value > above) \
                or (at_least is not None and not value >= at_least) or (below is not None and not value < below):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {expected}")
        return value

    return parse


positive = number(above=0)
positive_int = number(int, at_least=1)
