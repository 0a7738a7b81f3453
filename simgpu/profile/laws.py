"""Laws: how a quantity (seconds, bytes, a share of a resource) grows with the partition.

A law is to a profile what a formula cell is to a spreadsheet: a small arithmetic
expression over n (constraints per partition) and N (the NTT domain, 2^ceil(log2 n)),
with named coefficients beside it, e.g. ``{law = "a + b*N*log2(N)", a = 0.01, b =
1.1e-9}``; or measured points, linear between them, with the law to follow beyond.
This module is the one evaluator of laws: profiles, the model and calibration all ask
it, and nothing else calls ``eval``.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from simgpu.errors import UserError
from simgpu.profile.tomlwrite import Inline
from simgpu.units import parse_size

_BINOPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.FloorDiv: operator.floordiv,
}
_FUNCS = {
    "log2": math.log2,
    "log": math.log,
    "sqrt": math.sqrt,
    "ceil": math.ceil,
    "floor": math.floor,
    "min": min,
    "max": max,
}
_CONSTS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}


def _check_ast(node: ast.AST, names: set[str], text: str) -> None:
    for sub in ast.walk(node):
        ok = isinstance(
            sub,
            ast.Expression
            | ast.BinOp
            | ast.UnaryOp
            | ast.Constant
            | ast.Name
            | ast.Call
            | ast.Load
            | ast.operator
            | ast.unaryop,
        )
        if not ok:
            raise UserError(f"law {text!r}: {type(sub).__name__} is not allowed")
        if isinstance(sub, ast.BinOp) and type(sub.op) not in _BINOPS:
            raise UserError(f"law {text!r}: operator not allowed")
        if isinstance(sub, ast.Call):
            if not isinstance(sub.func, ast.Name) or sub.func.id not in _FUNCS or sub.keywords:
                raise UserError(f"law {text!r}: only {', '.join(_FUNCS)} may be called")
        if isinstance(sub, ast.Name) and sub.id not in names and sub.id not in _FUNCS:
            raise UserError(f"law {text!r}: unknown name {sub.id!r}")
        if isinstance(sub, ast.Constant) and (
            isinstance(sub.value, bool) or not isinstance(sub.value, int | float)
        ):
            raise UserError(f"law {text!r}: only numbers are allowed")


def _pow(a: float, b: float) -> float:
    # Floats, not Python's exact integers: 2^2^40 must overflow at once, not fill memory.
    return math.pow(a, b)


class _FloatArithmetic(ast.NodeTransformer):
    """A checked law's tree with its numbers as floats and `**` as a float power: the
    value is the same, and no expression can ask for an integer of a billion digits."""

    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.copy_location(ast.Constant(float(node.value)), node)

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.op, ast.Pow):
            call = ast.Call(ast.Name("_pow", ast.Load()), [node.left, node.right], [])
            return ast.copy_location(call, node)
        return node


@dataclass(frozen=True)
class Law:
    """A quantity as a function of the partition size: expression + coefficients.

    Every quantity a profile states (seconds, bytes, a demand, a share) is a finite
    number >= 0, so a law that evaluates to a negative or non-finite value is an error
    naming where it is written, never clamped."""

    expr: str
    coeffs: Mapping[str, float] = field(default_factory=dict)
    where: str = field(default="", compare=False)

    @cached_property
    def _code(self) -> Any:
        try:
            # '^' reads as a power in a profile (2^27), as it does in parse_size.
            tree = ast.parse(self.expr.replace("^", "**"), mode="eval")
        except SyntaxError:
            raise UserError(f"{self._at()}law {self.expr!r} is not a valid expression") from None
        _check_ast(tree, {"n", "N", *_CONSTS, *self.coeffs}, self.expr)
        tree = ast.fix_missing_locations(_FloatArithmetic().visit(tree))
        return compile(tree, "<law>", "eval")

    def _at(self) -> str:
        return f"{self.where}: " if self.where else ""

    def __call__(self, n: int) -> float:
        N = 1 << max(0, (int(n) - 1).bit_length())
        env = {"n": float(n), "N": float(N), **_CONSTS, **self.coeffs, **_FUNCS, "_pow": _pow}
        try:
            value = float(eval(self._code, {"__builtins__": {}}, env))  # noqa: S307 - AST checked above
        except (ZeroDivisionError, ValueError, OverflowError, TypeError) as e:
            raise UserError(f"{self._at()}law {self.expr!r} fails at n={n:,}: {e}") from None
        if not math.isfinite(value) or value < 0:
            raise UserError(
                f"{self._at()}law {self.expr!r} gives {value:g} at n={n:,}: "
                "a time, a size or a share must be a finite number >= 0"
            )
        return value

    def validate(self) -> Law:
        _ = self._code
        return self

    @staticmethod
    def parse(value: Any, where: str) -> Law | PointsLaw:
        """A law from TOML: a number, a size string ('4GiB'), an expression, a table
        {law = ..., coefficients...}, or measured points {points = [[n, value], ...]}, with
        an optional law for sizes outside them (beyond = {law = ..., ...})."""
        if isinstance(value, dict) and "points" in value:
            if set(value) - {"points", "beyond"}:
                extra = ", ".join(sorted(set(value) - {"points", "beyond"}))
                raise UserError(f"{where}: a points table takes points and beyond, not {extra}")
            return PointsLaw.parse(value["points"], where, value.get("beyond"))
        if isinstance(value, bool):
            raise UserError(f"{where}: expected a number or a law, got {value!r}")
        if isinstance(value, int | float):
            if not math.isfinite(value) or value < 0:
                raise UserError(f"{where}: {value!r} must be a finite number >= 0")
            return Law(repr(float(value)), where=where)
        if isinstance(value, str):
            try:
                return Law(str(parse_size(value, where)), where=where)
            except UserError:
                return Law(value, where=where).validate()
        if isinstance(value, dict):
            if "law" not in value:
                raise UserError(f"{where}: a law table needs a 'law' key")
            coeffs = {}
            for k, v in value.items():
                if k == "law":
                    continue
                if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                    raise UserError(f"{where}: coefficient {k} must be a finite number, got {v!r}")
                coeffs[k] = float(v)
            if not isinstance(value["law"], str):
                raise UserError(f"{where}: law must be a string expression, got {value['law']!r}")
            return Law(value["law"], coeffs, where=where).validate()
        raise UserError(f"{where}: expected a number or a law, got {value!r}")


@dataclass(frozen=True)
class PointsLaw:
    """A quantity measured at a few sizes: linear between neighbouring points and, beyond
    them, along the nearest segment if it rises (else flat: a noisy falling segment says
    nothing about larger sizes).  Exact where it was measured, which matters for
    footprints that step with the MSM window and fit no smooth law."""

    points: tuple[tuple[float, float], ...]
    #: Outside the measured sizes, if given: the law fitted over all of them.  A law fitted
    #: to every point carries less of one size's noise into a larger size than the last
    #: segment does, and follows the curvature (n log n, a window step) a segment lacks.
    beyond: Law | None = None

    def __call__(self, n: int) -> float:
        pts = self.points
        if self.beyond is not None and not pts[0][0] <= n <= pts[-1][0]:
            return self.beyond(n)
        if len(pts) == 1 or n < pts[0][0] and pts[1][1] > pts[0][1]:
            # below a rising first segment, or from one point: in proportion to the size
            # (a straight line down would cross zero before n does)
            return pts[0][1] * n / pts[0][0]
        i = 1
        while i < len(pts) - 1 and n > pts[i][0]:
            i += 1
        (x0, y0), (x1, y1) = pts[i - 1], pts[i]
        if (n > x1 or n < x0) and y1 <= y0:
            return y1 if n > x1 else y0
        t = (n - x0) / (x1 - x0)
        # weighted, not y0 + (y1 - y0) t: each measured point comes back exactly (the
        # other form gave 0.1 - 1e-17 at a point of 0.1, and a bound of 0 below zero)
        return y0 * (1 - t) + y1 * t

    @staticmethod
    def parse(value: Any, where: str, beyond: Any = None) -> PointsLaw:
        law = None
        if beyond is not None:
            law = Law.parse(beyond, f"{where}.beyond")
            if not isinstance(law, Law):
                raise UserError(f"{where}.beyond: expected a law, not points")
        try:
            pts = tuple(sorted((float(a), float(b)) for a, b in value))
        except (TypeError, ValueError):
            raise UserError(f"{where}: points must be [[n, value], ...]") from None
        if not pts or len({p[0] for p in pts}) != len(pts) or pts[0][0] <= 0:
            raise UserError(f"{where}: points need distinct positive sizes")
        if not all(math.isfinite(x) and math.isfinite(y) and y >= 0 for x, y in pts):
            raise UserError(f"{where}: point values must be finite numbers >= 0")
        return PointsLaw(pts, law)


# --------------------------------------------------------------------- fitting

#: Candidate laws for a stage time or a buffer size: basis functions of (n, N).
LAWS: dict[str, tuple[str, ...]] = {
    "a": ("1",),
    "a + b*n": ("1", "n"),
    "a + b*N*log2(N)": ("1", "N*log2(N)"),
    "a + b*n/log2(n)": ("1", "n/log2(n)"),
    "a + b*N": ("1", "N"),
    "a + b*n + c*N": ("1", "n", "N"),
    "a + b*sqrt(n) + c*n": ("1", "sqrt(n)", "n"),
}


def _basis(term: str, n: float) -> float:
    return Law(term)(int(n))


@dataclass
class Fit:
    """A candidate law fitted to measurements (fit_law): its coefficients and worst relative
    error; callable on n, and written into a profile as its law table."""

    law: str
    coeffs: dict[str, float]
    max_rel_error: float

    def law_table(self) -> Inline:
        expr = self.law
        return Inline(law=expr, **self.coeffs)

    def __call__(self, n: float) -> float:
        names = "abc"
        return sum(self.coeffs[names[i]] * _basis(t, n) for i, t in enumerate(LAWS[self.law]))


def fit_law(ns: list[float], ys: list[float], candidates: tuple[str, ...]) -> Fit:
    """The candidate law with the smallest worst relative error, coefficients >= 0 fitted
    by NNLS on relative residuals.  A law needs more points than coefficients, except the
    one-point case, which is fitted as proportional."""
    from scipy.optimize import nnls

    ns = [float(x) for x in ns]
    ys = [float(y) for y in ys]
    best: Fit | None = None
    for law in candidates:
        terms = LAWS[law]
        if len(ns) < len(terms) and not (len(ns) == 1 and len(terms) == 2):
            continue
        use = terms if len(ns) >= len(terms) else terms[1:]
        w = np.array([1.0 / max(abs(y), 1e-12) for y in ys])
        A = np.array([[_basis(t, n) for t in use] for n in ns]) * w[:, None]
        coef, _ = nnls(A, np.ones(len(ys)))
        if len(use) < len(terms):
            coef = np.concatenate([[0.0], coef])
        fit = Fit(law, {"abc"[i]: float(c) for i, c in enumerate(coef)}, 0.0)
        fit.max_rel_error = max(abs(fit(n) - y) / max(abs(y), 1e-12) for n, y in zip(ns, ys, strict=True))
        if best is None or fit.max_rel_error < best.max_rel_error - 1e-9:
            best = fit
    if best is None:
        raise UserError("nothing to fit: no measurements")
    return best
