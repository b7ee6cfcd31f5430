import io

import pytest
from rich.console import Console

from lakesweep.cli import render


@pytest.fixture
def printed(monkeypatch):
    """What the renderers print to stdout and stderr, as text (no terminal codes, wide lines)."""
    out, err = io.StringIO(), io.StringIO()
    monkeypatch.setattr(render, "out", Console(file=out, width=300, highlight=False, soft_wrap=True))
    monkeypatch.setattr(render, "err", Console(file=err, width=300, highlight=False, soft_wrap=True))
    return lambda: (out.getvalue(), err.getvalue())
