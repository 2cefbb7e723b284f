"""Charts drawn on the server as SVG geometry, so a page needs no script and no chart library."""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

WIDTH, HEIGHT = 720, 200
LEFT, BOTTOM, TOP = 48, 22, 10  # room for the axis labels


@dataclass
class Bar:
    x: float
    y: float
    width: float
    height: float
    label: str  # the bucket, e.g. "2026-12-01" or "12-01 06:00"
    value: str  # the value in words, with its unit
    amount: float = 0.0  # the value itself


@dataclass
class Chart:
    title: str
    unit: str
    bars: list[Bar]
    peak: float
    ticks: list[tuple[float, str]] = field(default_factory=list)  # (y, label) of the vertical axis
    labels: list[tuple[float, str]] = field(default_factory=list)  # (x, label) under some bars
    limit_y: float | None = None  # a horizontal line (the pool's capacity), when there is one
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def summary(self) -> str:
        """The chart in words, for a screen reader (the SVG's <desc>)."""
        if not self.bars:
            return f"{self.title}: no data."
        top = max(self.bars, key=lambda b: b.height)
        span = f"{len(self.bars)} bars from {self.bars[0].label} to {self.bars[-1].label}"
        return f"{self.title}: {span}; highest {top.value} at {top.label}."


def bar_chart(
    points: Sequence[tuple[str, float]], *, title: str, unit: str, limit: float | None = None, every: int = 1
) -> Chart:
    """Bars scaled to the highest value or `limit`, labelled every `every` bars; a value not finite gets none."""
    peak = max([v for _, v in points if math.isfinite(v)] + [limit or 0, 0]) or 1.0
    plot_w, plot_h = WIDTH - LEFT - 4, HEIGHT - BOTTOM - TOP
    step = plot_w / max(len(points), 1)
    chart = Chart(title=title, unit=unit, bars=[], peak=peak)
    for i, (label, value) in enumerate(points):
        if i % every == 0:
            chart.labels.append((round(LEFT + i * step + step / 2, 1), label))
        if not math.isfinite(value):
            continue
        h = value / peak * plot_h  # divided first: a value near a float's largest would overflow
        x = LEFT + i * step
        chart.bars.append(Bar(round(x + step * 0.1, 1), round(TOP + plot_h - h, 1), round(step * 0.8, 1),
                              round(h, 1), label, f"{_number(value)} {unit}", value))  # fmt: skip
    chart.ticks = [(round(TOP + plot_h * (1 - f), 1), _number(peak * f)) for f in (0, 0.5, 1)]
    if limit and math.isfinite(limit):
        chart.limit_y = round(TOP + plot_h * (1 - limit / peak), 1)
    return chart


def _number(value: float) -> str:
    if value == 0:
        return "0"
    return f"{value:,.0f}" if value >= 100 else f"{value:,.1f}" if value >= 1 else f"{value:.2f}"


@dataclass
class Line:
    name: str
    values: list[float]
    points: str = ""  # an SVG polyline's points
    last: tuple[str, str] = ("0", "0")  # where the last value is drawn (a dot: also seen with one value)
    width: int = 240
    height: int = 48


def line_chart(name: str, values: Sequence[float]) -> Line:
    """A line through `values` (finite, at least one), scaled between the lowest and the highest."""
    line = Line(name=name, values=list(values))
    low, high = min(line.values), max(line.values)
    step = (line.width - 8) / max(len(line.values) - 1, 1)
    xy = [
        (f"{4 + i * step:.1f}", f"{line.height - 4 - _fraction(v, low, high) * (line.height - 8):.1f}")
        for i, v in enumerate(line.values)
    ]
    line.points = " ".join(f"{x},{y}" for x, y in xy)
    line.last = xy[-1]
    return line


def _fraction(value: float, low: float, high: float) -> float:
    """Where `value` lies between `low` and `high`, halved first so a span of ±1e308 does not overflow."""
    span = high / 2 - low / 2
    return (value / 2 - low / 2) / span if span else 0.0
