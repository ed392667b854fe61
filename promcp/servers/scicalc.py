"""scicalc: scientific computing tools - safe expression evaluation, statistics, roots, unit conversion."""

from __future__ import annotations

import ast
import math
import operator
import statistics
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from promcp.servers._serve import serve

mcp = MCPServer(
    "scicalc",
    instructions="Scientific calculator: expressions, statistics, roots, unit conversion.",
    log_level="WARNING",
)

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., float]] = {
    name: getattr(math, name)
    for name in (
        "sqrt",
        "sin",
        "cos",
        "tan",
        "asin",
        "acos",
        "atan",
        "exp",
        "log",
        "log10",
        "log2",
        "floor",
        "ceil",
    )
}
_FUNCS["abs"] = abs
_CONSTS = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _eval(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, int | float)
        and not isinstance(node.value, bool)
    ):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ToolError("exponent too large")
        return float(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return float(_UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.Name) and node.id in _CONSTS:
        return _CONSTS[node.id]
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCS
        and not node.keywords
    ):
        return float(_FUNCS[node.func.id](*(_eval(a) for a in node.args)))  # math errors: ValueError
    raise ToolError(f"unsupported expression element: {ast.dump(node)[:60]}")


def evaluate_expression(expression: str) -> float:
    if len(expression) > 500:
        raise ToolError("expression longer than 500 characters")
    try:
        tree = ast.parse(expression.replace("^", "**"), mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"cannot parse expression: {exc.msg}") from exc
    try:
        value = _eval(tree)
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise ToolError(f"cannot evaluate {expression!r}: {exc}") from exc
    return int(value) if float(value).is_integer() and abs(value) < 2**53 else value


@mcp.tool()
def calculate(expression: str) -> float:
    """Evaluate an arithmetic expression, e.g. "2*(3+4)" or "sqrt(2)*pi". Supports + - * / // % ** and math functions."""
    return evaluate_expression(expression)


@mcp.tool()
def describe(values: list[float]) -> dict[str, float]:
    """Statistics of a list of numbers: count, mean, median, standard deviation (sample), min, max."""
    if not values:
        raise ToolError("values is empty")
    return {
        "count": len(values),
        "mean": statistics.fmean(values),
        "median": statistics.median(values),
        "stdev": statistics.stdev(values) if len(values) > 1 else 0.0,
        "min": min(values),
        "max": max(values),
    }


@mcp.tool()
def quadratic_roots(a: float, b: float, c: float) -> list[float]:
    """Real roots of a*x^2 + b*x + c = 0 (empty list if none)."""
    if a == 0:
        if b == 0:
            raise ToolError("a and b are both zero")
        return [-c / b]
    disc = b * b - 4 * a * c
    if disc < 0:
        return []
    r = math.sqrt(disc)
    return sorted({(-b - r) / (2 * a), (-b + r) / (2 * a)})


_UNITS: dict[str, tuple[str, float]] = {
    "m": ("length", 1.0),
    "km": ("length", 1000.0),
    "cm": ("length", 0.01),
    "mm": ("length", 0.001),
    "mi": ("length", 1609.344),
    "ft": ("length", 0.3048),
    "in": ("length", 0.0254),
    "kg": ("mass", 1.0),
    "g": ("mass", 0.001),
    "lb": ("mass", 0.45359237),
    "oz": ("mass", 0.028349523125),
    "s": ("time", 1.0),
    "min": ("time", 60.0),
    "h": ("time", 3600.0),
    "day": ("time", 86400.0),
}


@mcp.tool()
def convert_units(value: float, from_unit: str, to_unit: str) -> float:
    """Convert a value between units of length (m km cm mm mi ft in), mass (kg g lb oz), time (s min h day) or temperature (C F K)."""
    temps = {"C", "F", "K"}
    if from_unit in temps and to_unit in temps:
        kelvin = {"C": value + 273.15, "F": (value - 32) * 5 / 9 + 273.15, "K": value}[from_unit]
        return round({"C": kelvin - 273.15, "F": (kelvin - 273.15) * 9 / 5 + 32, "K": kelvin}[to_unit], 6)
    try:
        dim_a, fa = _UNITS[from_unit]
        dim_b, fb = _UNITS[to_unit]
    except KeyError as exc:
        raise ToolError(f"unknown unit {exc.args[0]!r}") from exc
    if dim_a != dim_b:
        raise ToolError(f"cannot convert {dim_a} to {dim_b}")
    return round(value * fa / fb, 9)


if __name__ == "__main__":
    serve(mcp)
