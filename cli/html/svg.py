"""The pieces every HTML report is made of: a page shell with plain CSS, and SVG charts drawn as text.

Every string that comes from a plan or a journal goes through ``esc`` (``html.escape`` with quotes), so a
path or an error message can never open a tag or an attribute. The page loads nothing: no script, no
font, no image, no link; the charts are inline SVG.
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Iterable, Sequence

from lakesweep.engine import units
from lakesweep.engine.timeutil import format_time_ms

WIDTH = 1000  # the width of every chart, in SVG units (the page scales it)

# Colours by meaning, the same on every page.
COLOURS = {
    "expired": "#d9534f", "dropped": "#d9534f", "deleted": "#d9534f", "candidate": "#d9534f",
    "kept": "#5cb85c", "young": "#5cb85c", "used": "#6baed6", "unparseable": "#f0ad4e", "unknown": "#999999",
    "before": "#8c6bb1", "after": "#2b8cbe", "bar": "#2b8cbe", "boundary": "#333333",
    "COMPLETED": "#5cb85c", "applied": "#5cb85c", "FAILED": "#d9534f", "failed": "#d9534f",
    "REFUSED": "#a6761d", "INCOMPLETE": "#f0ad4e", "DRY_RUN": "#5bc0de", "planned": "#5bc0de",
    "PLANNED": "#5bc0de", "SKIPPED": "#cccccc", "skipped": "#cccccc",
}

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       margin: 24px; color: #222; max-width: 1100px; font-size: 15px; }
h1 { font-size: 22px; margin-bottom: 4px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ddd; }
.meta { color: #555; margin: 2px 0; } .note { color: #555; font-style: italic; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #ddd; padding: 3px 8px;
        text-align: left; vertical-align: top; } th { background: #f4f4f4; }
td.wrap { overflow-wrap: anywhere; } td.num { text-align: right; font-variant-numeric: tabular-nums; } td.nowrap { white-space: nowrap; }
code { font-size: 13px; word-break: break-all; }
svg { display: block; width: 100%; max-width: 1000px; height: auto; margin: 8px 0; }
svg text { font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; font-size: 12px; fill: #222;
           paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
svg text.plain { stroke: none; }
.legend span { display: inline-block; margin-right: 16px; } .swatch { display: inline-block; width: 12px;
        height: 12px; margin-right: 4px; vertical-align: middle; border: 1px solid #0003; }
.warn { color: #8a4b00; }
"""


def esc(value) -> str:
    """``value`` as text that is safe inside an element or a quoted attribute."""
    return html.escape("" if value is None else str(value), quote=True)


def human_bytes(n: int | None) -> str:
    """``engine.units.human_bytes``, with an unknown size said in words on a page."""
    return "unknown size" if n is None else units.human_bytes(n)


def utc(ms: int | None) -> str:
    """Epoch milliseconds in the one spelling of times (``2026-11-25 22:35:01Z``); '-' for None."""
    return "-" if ms is None else format_time_ms(ms)


def utc_day(ms: int) -> str:
    return utc(ms)[:10]


def page(title: str, body: Iterable[str]) -> str:
    """A whole HTML document: ``title`` (escaped here) and ``body`` (already safe HTML)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>\n" + "\n".join(body)
            + "\n</body></html>\n")


def legend(items: Sequence[tuple[str, str]]) -> str:
    """A legend line: (colour key, label) pairs."""
    return "<div class=\"legend\">" + "".join(
        f"<span><span class=\"swatch\" style=\"background:{COLOURS.get(k, k)}\"></span>{esc(label)}</span>"
        for k, label in items) + "</div>"


def table(headers: Sequence[str], rows: Iterable[Sequence], *, numeric: Iterable[int] = (),
          nowrap: Iterable[int] = (), wrap: Iterable[int] = ()) -> str:
    """An HTML table; every cell escaped; columns in ``numeric`` right-aligned, those in ``nowrap`` (times)
    kept on one line, those in ``wrap`` (paths, ids) broken anywhere."""
    num, keep, anywhere = set(numeric), set(nowrap), set(wrap)

    def cell(i, c):
        cls = " ".join(n for n, on in (("num", i in num), ("nowrap", i in keep), ("wrap", i in anywhere)) if on)
        return f"<td class=\"{cls}\">{esc(c)}</td>" if cls else f"<td>{esc(c)}</td>"

    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(cell(i, c) for i, c in enumerate(r)) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


@dataclass
class Svg:
    """An SVG chart built element by element; ``str(svg)`` is the markup."""

    height: int
    label: str
    width: int = WIDTH

    def __post_init__(self):
        self.parts: list[str] = []

    def add(self, markup: str) -> None:
        self.parts.append(markup)

    def text(self, x: float, y: float, content, *, anchor: str = "start", size: int | None = None,
             weight: str | None = None, rotate: float | None = None, fill: str | None = None,
             cls: str | None = None) -> None:
        attrs = f' x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"'
        if cls:
            attrs += f' class="{esc(cls)}"'
        if size:
            attrs += f' font-size="{size}"'
        if weight:
            attrs += f' font-weight="{weight}"'
        if fill:
            attrs += f' fill="{fill}"'
        if rotate is not None:
            attrs += f' transform="rotate({rotate} {x:.1f} {y:.1f})"'
        self.add(f"<text{attrs}>{esc(content)}</text>")

    def line(self, x1, y1, x2, y2, *, colour="#999", width=1.0, dash: str | None = None, cls: str = "") -> None:
        d = f' stroke-dasharray="{dash}"' if dash else ""
        c = f' class="{esc(cls)}"' if cls else ""
        self.add(f'<line{c} x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" '
                 f'stroke-width="{width}"{d}/>')

    def rect(self, x, y, w, h, *, fill, cls: str = "", title: str | None = None, data: dict | None = None,
             stroke: str | None = None) -> None:
        attrs = f' class="{esc(cls)}"' if cls else ""
        for k, v in (data or {}).items():
            attrs += f' data-{k}="{esc(v)}"'
        s = f' stroke="{stroke}"' if stroke else ""
        inner = f"<title>{esc(title)}</title>" if title else ""
        self.add(f'<rect{attrs} x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" '
                 f'fill="{fill}"{s}>{inner}</rect>')

    def circle(self, cx, cy, r, *, fill, cls: str = "", title: str | None = None, data: dict | None = None,
               stroke: str | None = None) -> None:
        attrs = f' class="{esc(cls)}"' if cls else ""
        for k, v in (data or {}).items():
            attrs += f' data-{k}="{esc(v)}"'
        s = f' stroke="{stroke}" stroke-width="2"' if stroke else ""
        inner = f"<title>{esc(title)}</title>" if title else ""
        self.add(f'<circle{attrs} cx="{cx:.1f}" cy="{cy:.1f}" r="{r:.1f}" fill="{fill}"{s}>{inner}</circle>')

    def __str__(self) -> str:
        return (f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" role="img" '
                f'aria-label="{esc(self.label)}">' + "".join(self.parts) + "</svg>")


def bar_chart(rows: Sequence[tuple[str, int, int]], *, label: str, cls: str, value_is_bytes: bool = True,
              colour: str = COLOURS["bar"]) -> str:
    """Horizontal bars, one per row (name, value, count), largest first as given: the name left, the value
    and count right of the bar. The x axis is in bytes (or a count)."""
    if not rows:
        return "<p class=\"note\">Nothing to draw.</p>"
    left, right, row_h = 260, 170, 22
    top = 8
    svg = Svg(height=top + row_h * len(rows) + 40, label=label)
    most = max(v for _, v, _ in rows) or 1
    span = WIDTH - left - right
    for i, (name, value, count) in enumerate(rows):
        y = top + i * row_h
        shown = name if len(name) <= 38 else "…" + name[-37:]
        svg.text(left - 6, y + 15, shown, anchor="end")
        w = span * value / most
        what = human_bytes(value) if value_is_bytes else str(value)
        svg.rect(left, y + 3, max(w, 1), row_h - 6, fill=colour, cls=cls, data={"name": name, "value": value},
                 title=f"{name}: {what}, {count} file(s)")
        svg.text(left + max(w, 1) + 6, y + 15, f"{what} · {count} file(s)")
    base = top + row_h * len(rows) + 4
    svg.line(left, top, left, base, colour="#666")
    svg.line(left, base, left + span, base, colour="#666")
    for frac in (0, 0.5, 1):
        v = int(most * frac)
        svg.text(left + span * frac, base + 16, human_bytes(v) if value_is_bytes else str(v), anchor="middle")
    svg.text(left + span / 2, base + 32, "bytes" if value_is_bytes else "count", anchor="middle")
    return str(svg)
