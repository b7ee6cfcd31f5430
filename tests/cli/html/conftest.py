import os
from html.parser import HTMLParser
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """Where the browser tests write their screenshots: $LAKESWEEP_SCREENSHOT_DIR, else a pytest temporary
    directory; printed either way, so a reviewer can open them."""
    given = os.environ.get("LAKESWEEP_SCREENSHOT_DIR")
    where = Path(given) if given else tmp_path_factory.mktemp("screenshots")
    where.mkdir(parents=True, exist_ok=True)
    print(f"\nscreenshots of the HTML reports: {where}")
    return where


class Elements(HTMLParser):
    """Every start tag of a page, with its attributes, in document order."""

    def __init__(self, markup: str):
        super().__init__()
        self.found: list[tuple[str, dict]] = []
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, dict(attrs)))

    def with_class(self, tag: str, *classes: str) -> list[dict]:
        return [a for t, a in self.found if t == tag and set(classes) <= set((a.get("class") or "").split())]

    def tags(self, tag: str) -> list[dict]:
        return [a for t, a in self.found if t == tag]
