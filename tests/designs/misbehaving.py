"""Designs that break the runtime contract on purpose, for the reliability tests."""


def forever(rt, worker, part):
    """Never finishes and never blocks: a livelock, not a deadlock."""
    while True:
        yield rt.sleep(1.0)


def yields_42(rt, worker, part):
    """Yields something that is not a runtime waitable."""
    yield 42


def yields_none(rt, worker, part):
    """A bare `yield`."""
    yield
