"""Sets of time as sorted, disjoint intervals: union, intersection, difference, length.

Like marking a timeline with highlighters of several colours and asking how long two
colours overlap: the report's bottleneck shares are lengths of such sets ("waiting for a
lock" minus "its holder running kernels").  A set is a list of (start, end) pairs with
start < end, sorted and disjoint; every function returns one.
"""

from __future__ import annotations

from collections.abc import Iterable

Spans = list[tuple[float, float]]


def union(intervals: Iterable[tuple[float, float]]) -> Spans:
    """The set covered by any of `intervals` (in any order; empty ones dropped)."""
    out: Spans = []
    for a, b in sorted((a, b) for a, b in intervals if b > a):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def intersect(x: Spans, y: Spans) -> Spans:
    """The set covered by both `x` and `y` (sets)."""
    out: Spans = []
    i = j = 0
    while i < len(x) and j < len(y):
        a = max(x[i][0], y[j][0])
        b = min(x[i][1], y[j][1])
        if b > a:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x: Spans, y: Spans) -> Spans:
    """The set covered by `x` and not by `y` (sets)."""
    out: Spans = []
    j = 0
    for a, b in x:
        while j < len(y) and y[j][1] <= a:
            j += 1
        k = j
        start = a
        while k < len(y) and y[k][0] < b:
            if y[k][0] > start:
                out.append((start, y[k][0]))
            start = max(start, y[k][1])
            k += 1
        if b > start:
            out.append((start, b))
    return out


def clip(x: Spans, lo: float, hi: float) -> Spans:
    """The part of the set `x` within [lo, hi]."""
    return [(max(a, lo), min(b, hi)) for a, b in x if min(b, hi) > max(a, lo)]


def length(x: Spans) -> float:
    """The total length of the set `x`."""
    return sum(b - a for a, b in x)


def at_least(deltas: Iterable[tuple[float, int]], k: int) -> Spans:
    """The set during which a count is at least `k`, from its changes (time, +n / -n):
    e.g. the partitions in a queue from +1 when one is queued and -1 when one is taken.
    Changes at one instant apply together, so a count that goes up and down at the same
    time never counts as reached."""
    out: Spans = []
    count = 0
    since: float | None = None
    changes = sorted(deltas)
    i = 0
    while i < len(changes):
        t = changes[i][0]
        while i < len(changes) and changes[i][0] == t:
            count += changes[i][1]
            i += 1
        if count >= k and since is None:
            since = t
        elif count < k and since is not None:
            if t > since:
                out.append((since, t))
            since = None
    if since is not None:
        out.append((since, float("inf")))
    return out
