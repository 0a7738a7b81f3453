"""Shared resources that slow work down when oversubscribed (fluid sharing).

A job is a stage (or phase) with `work` seconds to do at full speed and, per shared
resource it leans on, a `demand` (GB/s of host memory bandwidth, cores, a whole GPU,
GB/s of host-to-device copy) and a `bound` fraction: how much of its unloaded time that
resource limits.  While the demands L_r of the running jobs exceed a resource's capacity
C_r, the bound fractions on it stretch by a factor f_r, and a job runs at speed

    1 / ( (1 - sum_r bound_r) + sum_r bound_r * f_r )

so two kernels sharing one GPU each run at half speed.  Two laws give f_r:

* **proportional** (the default, and what ``simgpu calibrate`` fits): f_r = L_r / C_r.
  A job 30% bound to a resource oversubscribed twice stretches by 1.3.  Jobs with small
  bound fractions then draw, together, more than the capacity: adding workers always
  adds throughput.
* **conserved** (``[contention.RESOURCE] law = "conserved"``): like water in pipes, the
  resource delivers at most its capacity.  A job draws its demand at full speed and in
  proportion to its speed when slowed, and f_r is the one common factor at which the
  draws add up to the capacity exactly:

      sum_j demand_j / ((1 - bound_j) + bound_j * f_r)  =  C_r

  so ten syntheses that already fill the host's memory bandwidth take twice as long when
  ten more join them, however small their bound fraction: past saturation, more workers
  share the bandwidth instead of multiplying it, and throughput flattens.

* **in-order** (``[contention.gpu] law = "in-order"``): the device as one stream that
  every worker queues its kernels and copies on, like one checkout lane: each job waits
  for what the others queued ahead of it, in proportion to their demand, whether or not
  the device has room, and never for its own.  A job's bound fraction stretches by
  1 + (L - own demand) / C, the bursts law below.  Demands then say how much of the
  stream a stage's work claims when it is queued beside another's: a stage that queues
  long runs of kernels between its syncs (the kernels stage) claims more than one that
  waits for each small result (the G2 MSM's read-backs), so sharing is lopsided:
  ``simgpu calibrate`` reads each from a pairing (simgpu.calibrate.fit.fit_device_queue).
  Under this law the device records no saturation: it has no capacity to pass.

**Thrashing.**  Past a knee, a resource loses efficiency: a memory system oversubscribed
by many threads spends its bandwidth on page walks and TLB shootdowns.  With L_r the
nominal load (the demands of all running jobs at full speed),

    effective capacity = C_r / (1 + loss * max(0, L_r / C_r - knee))

replaces C_r in either law, so aggregate throughput can fall past saturation, not only
flatten.  ``knee`` and ``loss`` are a profile's; without them a resource does not thrash.

**Links in series.**  A host-to-device copy reads host memory: a resource named in
`through` (("h2d", d) -> "membw") puts its jobs' demand on the other resource as well,
and their bound fraction stretches by the slower of the two links.

**Bursts.**  A lock-like resource (the driver's one reader of results) is held in
short bursts: a job's bursts collide with the others' at random,
whether or not the demands add up to more than the capacity, so there a job's factor is
1 + (L_r - own demand) / C_r.

**Pressure.**  Busy cores slow each other well below saturation, like runners on one
track: they share the chip's clock budget (its turbo falls as more cores run), its last
cache and its memory controllers.  The ``pressure`` resource (capacity: the cores) is a
*scaling* one: a stage's demand is the cores it keeps busy, its bound its sensitivity,
and beside k other busy cores of C its whole time, whatever else stretches it, takes
1 + bound * k / C times as long (Bubble-Up's pressure and sensitivity).  The
sensitivity is not a share of the stage's time: a launch loop wholly bound to the GPU
is slowed by busy cores too, so it multiplies the stretch rather than taking part of
the fractions' budget.  ``simgpu calibrate`` fits each bound from the stage timed alone
and beside a load of syntheses.

**Results coming back** follow the same law on a resource of their own, ``handoff``
(capacity 1): like a shop whose staff may stop to sign for every delivery, the driver's
threads can slow while a synthesis result is mapped into their process and let go
again (page tables, the copies' memory traffic, the interpreter lock around them),
however few cores are busy.  A result on its way back draws 1; a driver stage's bound
is how much longer each one beside it makes the stage, as ``simgpu calibrate`` times
it (the stage alone and beside results coming back; 0 where it finds no such slowing,
as on the one lease that has measured it).

**The interpreter lock** (`gil`) is scaling too, read as hand-overs, like a
single-key washroom: a driver thread lets the lock go at every CUDA call or compiled
loop and asks for it back, and each ask waits for whoever holds it then to let go.  A
stage's bound is how many asks it makes a millisecond of its time alone, its demand the
mean wait (ms) an ask from another thread meets while it runs (capacity 1 ms), so
beside stages whose waits add up to W it takes 1 + bound x W times as long.  A stage of
pure Python lets go only when made to, after the interpreter's switch interval (5 ms),
so beside it a launch loop of a hundred asks in 14 ms nearly stops, while two launch
loops, whose holds are microseconds, barely slow each other.  ``simgpu calibrate``
counts each stage's asks beside a thread of pure Python and times its waits with a
probe that asks at random moments (simgpu.calibrate.lock.measure_gil).

Speeds change only when a job starts or ends; between those instants every job's
remaining work shrinks linearly, so the next completion is known exactly and one
timeout per change suffices.

**Saturation.**  At each of those instants the share also notes which resources
stretch their bound jobs (a factor above 1): `saturation(end)` gives, per resource, the
intervals during which it was oversubscribed, which the report reads as "host memory
bandwidth bounded progress".
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterable, Mapping
from dataclasses import dataclass

import simpy

#: Work below this many seconds counts as finished (floating-point residue).
EPS = 1e-9
#: No resource saturated.
_NONE: frozenset = frozenset()
#: The stretch factor where a resource cannot serve its bound jobs at all (what jobs
#: that are not bound to it draw already fills it): they crawl rather than divide by 0.
MAX_FACTOR = 1e6


@dataclass(frozen=True)
class Thrash:
    """A resource's efficiency loss past a knee (see the module docstring)."""

    knee: float = 1.0
    loss: float = 0.0

    def effective(self, capacity: float, load: float) -> float:
        over = load / capacity - self.knee
        return capacity / (1.0 + self.loss * over) if over > 0 and self.loss > 0 else capacity


@dataclass(eq=False)
class Job:
    """One running job of the fluid share: its work left (seconds at full speed), what it
    leans on, the event that fires when it is done, and its current speed."""

    work: float
    uses: tuple[tuple[Hashable, float, float], ...]  # (resource, demand, bound)
    done: simpy.Event
    free_frac: float  # 1 less its bounds on the resources that share its time
    rate: float = 0.0  # until the fluid share rates it (at the end of its instant)


def free_fraction(uses: Iterable[tuple[Hashable, float, float]], scaling: Collection[Hashable]) -> float:
    """The share of a job's unloaded time no resource limits: 1 less its bounds, those
    on scaling resources (sensitivities, not shares) left out."""
    return 1.0 - sum(b for r, _, b in uses if r not in scaling)


def shared_factor(draws: list[tuple[float, float]], capacity: float) -> float:
    """The common stretch f of the bound fractions at which jobs drawing (demand, bound)
    use exactly `capacity`: the root of sum d / (1 - m + m f) = capacity, f >= 1.

    The left side falls and is convex in f, so Newton's method climbs to the root from
    below without overshooting; it starts at the proportional law's factor (total bound
    demand / room), which is never above the root (1 - m + m f <= f) and is the root when
    every bound is 1."""
    fixed = sum(d for d, m in draws if m <= 0.0)
    bound = [(d, m) for d, m in draws if m > 0.0]
    room = capacity - fixed
    total = sum(d for d, _ in bound)
    if not bound or total <= room:
        return 1.0
    if room <= 0.0:
        return MAX_FACTOR
    f = total / room
    for _ in range(60):
        g = -room
        dg = 0.0
        for d, m in bound:
            s = 1.0 - m + m * f
            g += d / s
            dg -= d * m / (s * s)
        step = g / dg
        f -= step
        if -step <= 1e-10 * f:
            break
        if f >= MAX_FACTOR:
            return MAX_FACTOR
    return f


def resource_factor(
    capacity: float, load: float, draws: Mapping[float, float] | None = None, thrash: Thrash | None = None
) -> float:
    """The stretch factor of the bound fractions on one resource (1 where it has room).

    `load` is the nominal load: the demands of every job running on it at full speed,
    those that reach it through another resource included.  `draws` (bound fraction ->
    the demand of the running jobs with it) makes it a conserved resource; None, a
    proportional one.  `thrash` lowers the capacity past its knee.  This is the one
    evaluator of the laws: the fluid share calls it at every change, and
    simgpu.calibrate.fromlog calls it for each instant of a log it fits."""
    c = capacity
    if thrash is not None:
        c = thrash.effective(c, load)
    if load <= c * (1 + 1e-12):
        return 1.0
    if draws is not None:
        return shared_factor([(d, m) for m, d in draws.items()], c)
    return load / c


def job_stretch(
    free_frac: float,
    uses: Iterable[tuple[Hashable, float, float]],
    factor: Mapping[Hashable, float],
    load: Mapping[Hashable, float],
    capacity: Mapping[Hashable, float],
    bursty: Collection[Hashable] = frozenset(),
    through: Mapping[Hashable, Hashable] | None = None,
    scaling: Collection[Hashable] = frozenset(),
) -> float:
    """How much longer than unloaded a job with `uses` ((resource, demand, bound)) and
    `free_frac` (`free_fraction`) takes while the resources stretch by `factor` (from
    `resource_factor`) under `load`: free_frac + sum bound * factor, a bound on a link
    stretched by the slower of the link and the resource behind it (`through`), a bound on
    a bursty resource by 1 + (the others' load) / capacity; the whole times
    1 + bound * (the others' load) / capacity for each scaling resource.  Its speed is
    1 / this."""
    stretch = free_frac
    scale = 1.0
    for res, demand, bound in uses:
        if res in scaling:
            scale *= 1.0 + bound * max(0.0, load[res] - demand) / capacity[res]
        elif res in bursty:
            stretch += bound * (1.0 + max(0.0, load[res] - demand) / capacity[res])
        else:
            f = factor[res]
            other = through.get(res) if through else None
            if other is not None and factor[other] > f:
                f = factor[other]
            stretch += bound * f
    return stretch * scale


class FluidShare:
    """Runs jobs on shared resources; `submit` returns an event that fires when done."""

    def __init__(
        self,
        env: simpy.Environment,
        capacity: Mapping[Hashable, float],
        bursty: frozenset[Hashable] = frozenset(),
        through: Mapping[Hashable, Hashable] | None = None,
        thrash: Mapping[Hashable, Thrash] | None = None,
        conserved: frozenset[Hashable] = frozenset(),
        scaling: frozenset[Hashable] = frozenset(),
    ) -> None:
        self.env = env
        self.capacity = dict(capacity)
        self.bursty = bursty  # lock-like resources, shared burst by burst
        self.through = dict(through or {})  # resource -> the resource its bytes also cross
        self.thrash = {r: t for r, t in (thrash or {}).items() if t.loss > 0}
        self.conserved = conserved  # resources shared by the conserved law
        self.scaling = scaling  # sensitivities that scale a job's whole time (pressure)
        for res, other in self.through.items():
            if res not in self.capacity or other not in self.capacity:
                raise KeyError(f"through: unknown resource {res!r} or {other!r}")
        self.load: dict[Hashable, float] = dict.fromkeys(self.capacity, 0.0)
        # per conserved resource, bound fraction -> the demand of the running jobs with it:
        # jobs of one stage share a bound, so the factor's equation has a few terms only
        self._draws: dict[Hashable, dict[float, float]] = {r: {} for r in conserved}
        self.active: list[Job] = []
        self._last = 0.0
        self._token = 0
        self._pending = False  # a reschedule is due at the end of this instant
        # which resources stretch their jobs now, since when, and the intervals closed
        self._saturated: frozenset[Hashable] = _NONE
        self._since: dict[Hashable, float] = {}
        self._intervals: dict[Hashable, list[tuple[float, float]]] = {r: [] for r in self.capacity}

    def submit(self, work: float, uses: tuple[tuple[Hashable, float, float], ...], what: str) -> simpy.Event:
        done = self.env.event()
        done.what = what  # read by deadlock reports
        if work <= EPS:
            done.succeed()
            return done
        if not uses:
            # Leans on nothing shared: a plain timeout, no bookkeeping.
            t = self.env.timeout(work)
            t.what = what
            return t
        for res, _, _ in uses:
            if res not in self.capacity:
                raise KeyError(f"unknown resource {res!r}")
        self._advance()
        job = Job(work, uses, done, free_fraction(uses, self.scaling))
        self.active.append(job)
        self._add_load(job, 1.0)
        self._changed()
        return done

    def _changed(self) -> None:
        """Speeds must be worked out again, once for all the changes of this instant: a
        stage's phases start and end in bursts at one time (a partition's next phase, the
        waiters a lock release wakes), and each change costs a pass over every job."""
        self._token += 1  # the wake-up scheduled under the old speeds is stale now
        if not self._pending:
            self._pending = True
            self.env.timeout(0).callbacks.append(self._flush)

    def _flush(self, _ev: object) -> None:
        self._pending = False
        self._reschedule()

    def _add_load(self, job: Job, sign: float) -> None:
        load = self.load
        through = self.through
        for res, demand, bound in job.uses:
            load[res] += sign * demand
            other = through.get(res)
            if other is not None:
                load[other] += sign * demand
            for r in (res, other):
                groups = self._draws.get(r)
                if groups is not None:
                    left = groups.get(bound, 0.0) + sign * demand
                    if left > 1e-9:
                        groups[bound] = left
                    else:
                        groups.pop(bound, None)

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self._last
        if dt > 0:
            for job in self.active:
                job.work -= dt * job.rate
        self._last = now

    def saturation(self, end: float) -> dict[Hashable, list[tuple[float, float]]]:
        """Per resource, the intervals during which it stretched its bound jobs, the one
        still open closed at `end`."""
        out = {r: list(spans) for r, spans in self._intervals.items()}
        for r, since in self._since.items():
            if end > since:
                out[r].append((since, end))
        return out

    def _note_saturation(self, factor: dict[Hashable, float], over: dict[Hashable, float]) -> None:
        # Called at a change of speeds with something over capacity or saturated before:
        # a set comparison when nothing changed.
        sat = frozenset([r for r in over if factor[r] > 1.0]) if over else _NONE
        if sat == self._saturated:
            return
        now = self.env.now
        for r in sat - self._saturated:
            self._since[r] = now
        for r in self._saturated - sat:
            since = self._since.pop(r)
            if now > since:
                self._intervals[r].append((since, now))
        self._saturated = sat

    def _factors(self) -> tuple[dict[Hashable, float], dict[Hashable, float]]:
        """The factors, and the resources stretching their bound jobs (factor above 1)."""
        cap = self.capacity
        thrash = self.thrash
        draws = self._draws
        factor = dict.fromkeys(self.load, 1.0)
        over = {}
        bursty = self.bursty
        scaling = self.scaling
        for r, lr in self.load.items():
            if r in bursty or r in scaling:
                continue
            t = thrash.get(r)
            if t is None and lr <= cap[r] * (1 + 1e-12):
                continue  # room: resource_factor's own first answer, without the call
            f = resource_factor(cap[r], lr, draws.get(r), t)
            if f > 1.0:
                factor[r] = f
                over[r] = f
        return factor, over

    def _reschedule(self) -> None:
        cap = self.capacity
        load = self.load
        factor, over = self._factors()
        if over or self._saturated:
            self._note_saturation(factor, over)
        bursty = self.bursty
        through = self.through
        scaling = self.scaling
        soonest = None
        for job in self.active:
            job.rate = 1.0 / job_stretch(job.free_frac, job.uses, factor, load, cap, bursty, through, scaling)
            t = job.work / job.rate
            if soonest is None or t < soonest:
                soonest = t
        self._token += 1
        if soonest is not None:
            token = self._token
            ev = self.env.timeout(max(0.0, soonest))
            ev.callbacks.append(lambda _ev, token=token: self._wake(token))

    def _wake(self, token: int) -> None:
        if token != self._token:
            return  # a later change rescheduled; this wake-up is stale
        self._advance()
        now = self.env.now
        still = []
        for job in self.active:
            if job.rate == 0.0:  # submitted this instant, not rated yet: cannot be done
                still.append(job)
                continue
            # Done when the work left is residue, or when what is left could not move the
            # clock at all: far into a run (1e7 s and beyond) a float cannot hold "now plus
            # a nanosecond", and waiting for it would wake at the same instant for ever.
            if job.work <= EPS or now + job.work / job.rate <= now:
                self._add_load(job, -1.0)
                job.done.succeed()
            else:
                still.append(job)
        self.active = still
        for res, value in self.load.items():
            if abs(value) < 1e-9:
                self.load[res] = 0.0
        self._changed()
