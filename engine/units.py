"""Sizes as people read them in messages and text output (JSON keeps the numbers)."""

from __future__ import annotations


def human_bytes(n: int | None) -> str:
    """``n`` bytes in binary units, one decimal from KiB on: ``512 B``, ``1.2 MiB``; ``?`` when unknown."""
    if n is None:
        return "?"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
