"""Progress on stderr, for people at a terminal.

Drawn only for text output when stderr is a terminal (rich's ``Console.is_terminal``): with ``--output json``,
in a pipe or in CI nothing extra is printed. ``plan expire`` (``MetadataReadProgress``): a bar over the
manifest files read so far out of those named so far, whose total grows while planning discovers snapshots;
``apply``, ``resume`` and ``demo`` (``RichProgress``): a bar per phase with files, bytes and rates, averaged
since the bar started. How the totals are counted: docs/design/apply.md#progress.
"""

from __future__ import annotations

import threading
from typing import Sequence

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from lakesweep.cli import render

MANIFEST_FILES = frozenset({"manifest list", "manifest", "index manifest"})


def progress_enabled(text_output: bool) -> bool:
    """Whether to draw progress: text output, and stderr is a terminal."""
    return text_output and render.err.is_terminal


class RateColumn(ProgressColumn):
    """``task.fields["files"]`` (or ``["bytes"]``) per second since the task started."""

    def __init__(self, field: str):
        super().__init__()
        if field not in ("files", "bytes"):
            raise ValueError(f"no rate for field {field!r}")
        self.field = field

    def render(self, task: Task) -> Text:
        elapsed = task.elapsed
        unit = "files/s" if self.field == "files" else "B/s"
        if not elapsed:
            return Text(f"? {unit}", style="progress.data.speed")
        rate = task.fields.get(self.field, 0) / elapsed
        if self.field == "bytes":
            shown = f"{render.human_bytes(int(rate))}/s"
        else:
            shown = f"{rate:,.1f} files/s" if rate < 10 else f"{rate:,.0f} files/s"
        return Text(shown, style="progress.data.speed")


class ManifestCountColumn(ProgressColumn):
    """``read/named manifests`` (the total is ``?`` until a snapshot or list named one)."""

    def render(self, task: Task) -> Text:
        total = "?" if task.total is None else f"{int(task.total):,}"
        return Text(f"{int(task.completed):,}/{total} manifests", style="progress.download")


class MetadataReadProgress:
    """An ``engine.paimon.table.ReadObserver`` that draws what planning reads (see the module docstring).

    Give it to the table view (``open_table(..., on_read=...)``); the bar is drawn between ``__enter__``
    and ``__exit__``; reads before that are counted and shown when it starts."""

    def __init__(self):
        self._lock = threading.Lock()
        self._named: set[str] = set()
        self.manifests = 0
        self.files = 0
        self.bytes = 0
        self.bar = Progress(
            SpinnerColumn(), TextColumn("[bold]{task.description}"), BarColumn(), ManifestCountColumn(),
            TextColumn("{task.fields[files]:,} files"), TextColumn("{task.fields[size]}"),
            RateColumn("files"), RateColumn("bytes"), TimeElapsedColumn(),
            console=render.err, transient=False,
        )
        self.task = self.bar.add_task("reading metadata", total=None, files=0, bytes=0, size="0 B")

    def __enter__(self) -> "MetadataReadProgress":
        self.bar.start()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            with self._lock:
                self.bar.update(self.task, description="read metadata", total=self.manifests)
        self.bar.stop_task(self.task)
        self.bar.stop()

    def read(self, path: str, what: str, nbytes: int) -> None:
        with self._lock:
            self.files += 1
            self.bytes += nbytes
            if what in MANIFEST_FILES:
                self.manifests += 1
                self._named.add(path.rsplit("/", 1)[-1])
            self._show()

    def named(self, names: Sequence[str]) -> None:
        with self._lock:
            before = len(self._named)
            self._named.update(names)
            if len(self._named) != before:
                self._show()

    def _show(self) -> None:
        self.bar.update(self.task, completed=self.manifests, total=len(self._named) or None, files=self.files,
                        bytes=self.bytes, size=render.human_bytes(self.bytes))


class RichProgress:
    """The applier's ``Progress`` (``applier.apply.Progress``): a bar per phase with files, bytes and
    their rates. Draws nothing unless ``enabled`` and stderr is a terminal."""

    def __init__(self, enabled: bool):
        self.enabled = progress_enabled(enabled)
        self.bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("files"),
            TextColumn("{task.fields[size]}"), RateColumn("files"), RateColumn("bytes"), TimeElapsedColumn(),
            console=render.err, transient=False,
        )
        self.task = None
        self.total_bytes = 0
        self.done_bytes = 0
        self.done_files = 0

    def __enter__(self):
        if self.enabled:
            self.bar.start()
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.bar.stop()

    def phase_started(self, phase, files, size):
        if self.enabled:
            self.total_bytes, self.done_bytes, self.done_files = size, 0, 0
            self.task = self.bar.add_task(phase.replace("_", " "), total=max(files, 0),
                                          files=0, bytes=0, size=self._size())

    def advance(self, files, size):
        if self.enabled and self.task is not None:
            self.done_files += files
            self.done_bytes += size
            self.bar.update(self.task, advance=files, files=self.done_files, bytes=self.done_bytes,
                            size=self._size())

    def phase_finished(self, phase):
        if self.enabled and self.task is not None:
            self.bar.stop_task(self.task)
            self.task = None

    def _size(self) -> str:
        return f"{render.human_bytes(self.done_bytes)} / {render.human_bytes(self.total_bytes)}"
