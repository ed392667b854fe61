"""medcalc: common clinical formulas (for benchmarking tool use, not for medical decisions)."""

from __future__ import annotations

import math

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from promcp.servers._serve import serve

mcp = MCPServer(
    "medcalc", instructions="Clinical calculator formulas. Not for medical decisions.", log_level="WARNING"
)


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ToolError(f"{name} must be positive, got {value}")
    return value


@mcp.tool()
def bmi(weight_kg: float, height_cm: float) -> float:
    """Body mass index in kg/m2 from weight (kg) and height (cm), rounded to 1 decimal."""
    h = _positive("height_cm", height_cm) / 100
    return round(_positive("weight_kg", weight_kg) / (h * h), 1)


@mcp.tool()
def body_surface_area(weight_kg: float, height_cm: float) -> float:
    """Body surface area in m2 (Mosteller formula), rounded to 2 decimals."""
    return round(math.sqrt(_positive("weight_kg", weight_kg) * _positive("height_cm", height_cm) / 3600), 2)


@mcp.tool()
def creatinine_clearance(age: int, weight_kg: float, serum_creatinine_mg_dl: float, female: bool) -> float:
    """Creatinine clearance in mL/min (Cockcroft-Gault), rounded to 1 decimal."""
    value = (
        (140 - age)
        * _positive("weight_kg", weight_kg)
        / (72 * _positive("serum_creatinine_mg_dl", serum_creatinine_mg_dl))
    )
    return round(value * (0.85 if female else 1.0), 1)


@mcp.tool()
def mean_arterial_pressure(systolic: float, diastolic: float) -> float:
    """Mean arterial pressure in mmHg from systolic and diastolic pressure, rounded to 1 decimal."""
    return round((systolic + 2 * diastolic) / 3, 1)


@mcp.tool()
def qtc_bazett(qt_ms: float, heart_rate_bpm: float) -> float:
    """Corrected QT interval in ms (Bazett) from QT (ms) and heart rate (beats/min), rounded to 0 decimals."""
    rr = 60 / _positive("heart_rate_bpm", heart_rate_bpm)
    return round(_positive("qt_ms", qt_ms) / math.sqrt(rr))


if __name__ == "__main__":
    serve(mcp)
