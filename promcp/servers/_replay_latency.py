"""Latency models for replay servers: how long a ``tools/call`` takes before the answer is sent.

Spec strings (``--latency``): ``none`` (answer at once), ``fixed:MS``, ``uniform:LO_MS:HI_MS``,
``lognormal:MEDIAN_MS:SIGMA``. Draws come from one seeded generator per server process, so a run's sequence of
delays is the same every time. A recorded response that carries ``latency_ms`` uses that value instead (``recorded``
latency wins over the model).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from promcp.errors import ConfigError

KINDS = ("none", "fixed", "uniform", "lognormal")


@dataclass
class LatencyModel:
    kind: str = "none"
    params: tuple[float, ...] = ()
    seed: int = 0
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def draw_ms(self) -> float:
        if self.kind == "fixed":
            return self.params[0]
        if self.kind == "uniform":
            return self._rng.uniform(self.params[0], self.params[1])
        if self.kind == "lognormal":
            return self.params[0] * math.exp(self._rng.gauss(0.0, self.params[1]))
        return 0.0


def parse_latency(spec: str, seed: int = 0) -> LatencyModel:
    """``none`` | ``fixed:MS`` | ``uniform:LO:HI`` | ``lognormal:MEDIAN:SIGMA`` → :class:`LatencyModel`."""
    kind, _, rest = spec.partition(":")
    arity = {"none": 0, "fixed": 1, "uniform": 2, "lognormal": 2}
    if kind not in arity:
        raise ConfigError(f"unknown latency model {kind!r}; known: {', '.join(KINDS)}", key="--latency")
    try:
        params = tuple(float(p) for p in rest.split(":")) if rest else ()
    except ValueError:
        raise ConfigError(f"latency parameters must be numbers: {spec!r}", key="--latency") from None
    if len(params) != arity[kind] or any(p < 0 for p in params):
        shape = {
            "none": "none",
            "fixed": "fixed:MS",
            "uniform": "uniform:LO:HI",
            "lognormal": "lognormal:MEDIAN:SIGMA",
        }
        raise ConfigError(f"expected {shape[kind]} with non-negative numbers, got {spec!r}", key="--latency")
    if kind == "uniform" and params[0] > params[1]:
        raise ConfigError(f"uniform latency needs LO <= HI, got {spec!r}", key="--latency")
    return LatencyModel(kind, params, seed)
