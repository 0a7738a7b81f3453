"""Sweeps and tuning: many configurations' Monte Carlo at once, on a Dask cluster.

grid (the axes and their points) -> point (one point's Monte Carlo, a pure function a
worker runs) -> cluster (a Dask client, and the runner that sends points to it) ->
results, table, heatmap (what a finished sweep shows and writes); tune (Optuna over the
same axes) and cuzk_toml (its best configuration as a file).  Dask, Optuna and pyarrow
come with the `sweep` extra; `require_extra` says how to get them.
"""

from __future__ import annotations

import importlib

from simgpu.errors import UserError

#: import name -> what it is for, of the packages the `sweep` extra brings.
EXTRA = {"distributed": "Dask's cluster", "optuna": "tuning", "pyarrow": "Parquet files"}


def require_extra(command: str, *modules: str) -> None:
    """One line, not a traceback, when a package of the `sweep` extra is missing."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            raise UserError(
                f"simgpu {command} needs {name} ({EXTRA.get(name, 'the sweep extra')}): "
                "pip install 'simgpu[sweep]'"
            ) from None
