"""The CI gate: a token budget, and a comparison with a saved ``promcp footprint --format json`` output.

* ``--budget N``: fails when the total schema tokens under the first tokenizer exceed ``N``;
* ``--baseline FILE --tolerance T``: fails when, under any tokenizer both runs counted, the total grew by more than
  ``T`` (``5%`` of the baseline's total, or ``200`` tokens; default 0: any growth). Per tool it lists what was
  added, removed, grew or shrank.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from promcp.errors import ConfigError
from promcp.footprint._measure import Footprint

#: A baseline file larger than this is refused (a footprint of 10,000 tools is a few MiB).
MAX_BASELINE_BYTES = 64 * 2**20


@dataclass(frozen=True)
class Tolerance:
    value: float
    relative: bool  # True: a fraction of the baseline total

    @classmethod
    def parse(cls, text: str) -> Tolerance:
        raw = text.strip()
        try:
            if raw.endswith("%"):
                value, relative = float(raw[:-1]) / 100.0, True
            else:
                value, relative = float(raw), False
        except ValueError:
            raise ConfigError(
                f"{text!r} is neither a percentage (5%) nor a number of tokens (200)", source="--tolerance"
            ) from None
        if value < 0 or value != value:
            raise ConfigError(f"{text!r}: a tolerance cannot be negative", source="--tolerance")
        return cls(value, relative)

    def allowed(self, base: int) -> float:
        return base * self.value if self.relative else self.value

    def __str__(self) -> str:
        return f"{self.value * 100:g}%" if self.relative else f"{self.value:g} tokens"


@dataclass(frozen=True)
class Baseline:
    path: str
    totals: dict[str, int]
    tools: dict[tuple[str, str], int]  # (tokenizer, tool) → tokens


@dataclass
class Verdict:
    """What the gate decided: ``failures`` (one line each; empty = pass) and the rows of the comparison."""

    failures: list[str] = field(default_factory=list)
    changes: list[dict[str, Any]] = field(default_factory=list)
    budget: int | None = None
    baseline: str | None = None
    tolerance: str | None = None

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": "pass" if self.passed else "fail", "failures": list(self.failures)}
        if self.budget is not None:
            out["budget"] = self.budget
        if self.baseline is not None:
            out["baseline"] = self.baseline
            out["tolerance"] = self.tolerance
        return out


def read_baseline(path: str | Path) -> Baseline:
    """A saved ``promcp footprint --format json`` output. Raises :class:`ConfigError` naming the file and what is
    wrong with it."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if size > MAX_BASELINE_BYTES:
            raise ConfigError(
                f"{p}: {size:,} bytes is larger than a footprint file can be ({MAX_BASELINE_BYTES:,})",
                source="--baseline",
            )
        doc = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {p}: {exc.strerror or exc}", source="--baseline") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p} is not JSON ({exc})", source="--baseline") from None
    totals = doc.get("totals") if isinstance(doc, dict) else None
    if not isinstance(totals, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in totals.values()
    ):
        raise ConfigError(
            f'{p} is not a `promcp footprint --format json` output (no "totals" of token counts)',
            source="--baseline",
        )
    tools: dict[tuple[str, str], int] = {}
    rows = (doc.get("tables") or {}).get("tools") if isinstance(doc.get("tables"), dict) else None
    for row in rows if isinstance(rows, list) else ():
        if isinstance(row, dict) and isinstance(row.get("tokens"), int):
            tools[(str(row.get("tokenizer")), str(row.get("tool")))] = int(row["tokens"])
    return Baseline(str(p), {str(k): int(v) for k, v in totals.items()}, tools)


def judge(
    fp: Footprint,
    *,
    budget: int | None = None,
    baseline: Baseline | None = None,
    tolerance: Tolerance | None = None,
) -> Verdict:
    """Apply the budget and the baseline comparison to a footprint."""
    verdict = Verdict(budget=budget)
    first = fp.tokenizers[0]
    if budget is not None and fp.total(first) > budget:
        verdict.failures.append(
            f"over budget: {fp.total(first):,} schema tokens ({first}) > {budget:,} "
            f"(by {fp.total(first) - budget:,})"
        )
    if baseline is None:
        return verdict
    tol = tolerance or Tolerance(0.0, relative=False)
    verdict.baseline, verdict.tolerance = baseline.path, str(tol)
    common = [n for n in fp.tokenizers if n in baseline.totals]
    if not common:
        verdict.failures.append(
            f"the baseline {baseline.path} counted {', '.join(sorted(baseline.totals)) or 'no tokenizer'}, "
            f"not {', '.join(fp.tokenizers)}: compare under the same --tokenizers"
        )
        return verdict
    for name in common:
        base, now = baseline.totals[name], fp.total(name)
        verdict.changes.append(
            {"tokenizer": name, "tool": "(total)", "baseline": base, "tokens": now, "change": now - base}
        )
        if now - base > tol.allowed(base):
            verdict.failures.append(
                f"regression: {now:,} schema tokens ({name}) against {base:,} in the baseline "
                f"(+{now - base:,}, tolerance {tol})"
            )
    name = common[0]
    current = {t.name: t.tokens[name] for t in fp.tools}
    before = {tool: n for (tok, tool), n in baseline.tools.items() if tok == name}
    for tool in sorted(set(current) | set(before)):
        b, c = before.get(tool), current.get(tool)
        if b == c:
            continue
        status = "added" if b is None else "removed" if c is None else "grew" if (c or 0) > b else "shrank"
        verdict.changes.append(
            {
                "tokenizer": name,
                "tool": tool,
                "baseline": b,
                "tokens": c,
                "change": (c or 0) - (b or 0),
                "status": status,
            }
        )
    return verdict
