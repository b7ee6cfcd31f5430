"""Shell globs for path filters, translated once so the in-memory and DuckDB journals match alike.

The regex uses only syntax that Python's ``re`` and DuckDB's RE2 read the same way, and follows
``fnmatch`` semantics (``*`` also crosses ``/``) rather than DuckDB's GLOB, whose backslash escapes and
bracket negation differ from fnmatch.
"""

from __future__ import annotations

import string


def _esc(c: str) -> str:
    return "\\" + c if c in string.punctuation else c


def _tokens(pattern: str) -> list[tuple[bool, str]]:
    """The glob as ``(literal, text)`` pieces: a literal character, or a regex for a wildcard or class."""
    out: list[tuple[bool, str]] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not out or out[-1] != (False, ".*"):
                out.append((False, ".*"))
        elif c == "?":
            out.append((False, "."))
        elif c == "[":
            j = i + (i < n and pattern[i] == "!")
            j += j < n and pattern[j] == "]"
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal '['
                out.append((True, "["))
                continue
            body, i = pattern[i:j], j + 1
            negate = body.startswith("!")
            out.append((False, ("[^" if negate else "[") + _class_body(pattern, body[1:] if negate else body) + "]"))
        else:
            out.append((True, c))
    return out


def glob_regex(pattern: str) -> str:
    """A shell glob (``fnmatch`` semantics) as a regex that Python's ``re`` and DuckDB's RE2 read alike."""
    return "(?s)" + "".join(_esc(t) if literal else t for literal, t in _tokens(pattern))


def glob_literal(pattern: str) -> str:
    """The longest run of plain characters every match contains ("" if none): a cheap prefilter.

    A path that lacks it cannot match, so ``contains(path, literal) AND regexp_full_match(...)`` selects
    the same rows while the substring search, not the regex, reads most of them.
    """
    best, run = "", []
    for literal, t in _tokens(pattern) + [(False, "")]:
        if literal:
            run.append(t)
            continue
        if len(run) > len(best):
            best = "".join(run)
        run = []
    return best


def _class_body(pattern: str, body: str) -> str:
    items, k = [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo > hi:
                raise ValueError(f"path glob {pattern!r}: range {lo}-{hi} is reversed")
            items.append(_esc(lo) + "-" + _esc(hi))
            k += 3
        else:
            items.append(_esc(body[k]))
            k += 1
    return "".join(items)
