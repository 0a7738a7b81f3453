"""A small TOML writer for the documents simgpu writes (profiles).

Python reads TOML (tomllib) but does not write it.  This covers what profiles hold:
tables, arrays of tables, inline tables (laws, resource uses), strings, numbers,
booleans and flat arrays.  Keys are written in insertion order.
"""

from __future__ import annotations

import math
import re
from typing import Any

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


class Inline(dict):
    """A dict written as an inline table: time = { law = "a*n", a = 1e-9 }."""


def _key(k: str) -> str:
    return k if _BARE.match(k) else _string(k)


def _string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"TOML has no {v}")
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _is_table(v: Any) -> bool:
    return isinstance(v, dict) and not isinstance(v, Inline)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(_is_table(x) for x in v)


def _emit(out: list[str], path: list[str], table: dict[str, Any], comments: dict[str, str]) -> None:
    scalars = [(k, v) for k, v in table.items() if not _is_table(v) and not _is_table_array(v)]
    for k, v in scalars:
        line = f"{_key(k)} = {_value(v)}"
        note = comments.get(".".join([*path, k]))
        out.append(f"{line}  # {note}" if note else line)
    for k, v in table.items():
        if _is_table(v):
            out.append("")
            out.append(f"[{'.'.join(_key(p) for p in [*path, k])}]")
            _emit(out, [*path, k], v, comments)
        elif _is_table_array(v):
            for item in v:
                out.append("")
                out.append(f"[[{'.'.join(_key(p) for p in [*path, k])}]]")
                _emit(out, [*path, k], item, comments)


def dumps(doc: dict[str, Any], header: str = "", comments: dict[str, str] | None = None) -> str:
    """TOML text of `doc`; `header` lines become comments on top; `comments` maps dotted
    keys (stages.synthesis.time) to end-of-line notes."""
    out = [f"# {line}".rstrip() for line in header.splitlines()] if header else []
    _emit(out, [], doc, comments or {})
    return "\n".join(out).lstrip("\n") + "\n"
