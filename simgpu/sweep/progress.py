"""The progress bar of a sweep or a tune: on stderr, so --json on stdout stays clean."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


@contextmanager
def progress_bar(total: int, what: str, enabled: bool = True) -> Iterator[Callable[..., None]]:
    """A bar of `total` steps; yields `advance(*_)`, to call once per finished step (its
    arguments are ignored, so it can be a runner's `on_done`)."""
    if not enabled:
        yield lambda *_: None
        return
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
    )
    with Progress(*columns, console=Console(stderr=True), transient=False) as bar:
        task = bar.add_task(what, total=total)
        yield lambda *_: bar.advance(task)
