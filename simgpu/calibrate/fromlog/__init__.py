"""`simgpu calibrate --from-log`: a profile fitted from a proving daemon's own log.

An operator's cuzk daemon already times what a profile needs (simgpu.cuzklog
reads it; docs/log-format.md maps each of its fields to simgpu's stages).  From one log:

* each stage's time and its noise: synthesis from the TIMELINE intervals, prep,
  b_g2_msm and the GPU part under the mutex from the CUZK_TIMING durations, the
  epilogue from what the GPU call leaves over;
* the contention laws: a stage's time against what else ran beside it, under the law
  the base profile shares each resource by (proportional, or conserved with its
  thrashing past a knee; each GPU's copies drawing on host memory through the link).
  Each sample's life is cut where the jobs beside it start and end (their demands are
  the base's), and in each piece its speed is what the model's own evaluator
  (simgpu.model.contention: resource_factor, job_stretch) gives for those jobs and the
  stages' bounds; the bounds are those under which the work the samples imply is most
  alike, for all stages at once (under the conserved law a stage's bound sets what its
  jobs draw, so what every other stage beside them sees).  A bound is fitted only where
  the log can pin it (enough samples, a resource oversubscribed beside them, a small
  standard error); otherwise it is not identifiable and the base's stays;
* the configuration: from the daemon's startup lines, else from --config (a cuzk TOML),
  else inferred from the log (and said so).

A log cannot inform hardware capacities (VRAM, host RAM, bandwidths), buffers and
footprints, or how a time grows with the partition size (a log has one size): those come
from the base profile (the seed by default), and the written profile's header says what
came from where, and why.  Then the fitted profile predicts the logged configuration,
and its throughput and mean mutex wait are set beside the log's.

samples (the log as jobs) -> settings (what it ran) -> bounds (the contention fit) ->
fitted (the profile written, and its check): each module takes only from those before it.
"""

from simgpu.calibrate.fromlog.fitted import FromLog, fit_from_log

__all__ = ["FromLog", "fit_from_log"]
