"""Shell globs for path filters, translated once so the in-memory and DuckDB journals match alike.

The regex uses only syntax that Python's ``re`` and DuckDB's RE2 read the same way, and follows
``fnmatch`` semantics (``*`` also crosses ``/``) rather than DuckDB's GLOB, whose backslash escapes and
bracket negation differ from fnmatch.
"""

from __future__ import annotations

import string


def _esc(c: str) -> str:
    return "\\" + c if c in string.punctuation else c


def glob_regex(pattern: str) -> str:
    """A shell glob (``fnmatch`` semantics) as a regex that Python's ``re`` and DuckDB's RE2 read alike."""
    out, i, n = [], 0, len(pattern)
    while i < n:
        c = pattern[i]
        i += 1
        if c == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[":
            j = i + (i < n and pattern[i] == "!")
            j += j < n and pattern[j] == "]"
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:  # no closing bracket: a literal '['
                out.append("\\[")
                continue
            body, i = pattern[i:j], j + 1
            negate = body.startswith("!")
            out.append(("[^" if negate else "[") + _class_body(pattern, body[1:] if negate else body) + "]")
        else:
            out.append(_esc(c))
    return "(?s)" + "".join(out)


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
