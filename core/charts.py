"""Charts drawn on the server as SVG geometry, so a page needs no script and no chart library."""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from core import formats

WIDTH, HEIGHT = 720, 200
LEFT, BOTTOM, TOP = 48, 22, 22  # room for the axis labels, and the axis's unit above it
CHAR_W = 6.5  # about the width of a character of an axis label (11 px), to leave room for the longest
MOST_LEFT = 160  # a label wider than this is cut rather than squeeze the plot
TICKS = 4  # about this many steps up the vertical axis
NICE = (1.0, 2.0, 2.5, 5.0, 10.0)  # steps are one of these times a power of ten


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
    peak: float  # the highest value
    ticks: list[tuple[float, str]] = field(default_factory=list)  # (y, label) of the vertical axis
    labels: list[tuple[float, str]] = field(default_factory=list)  # (x, label) under some bars
    limit_y: float | None = None  # a horizontal line (the pool's capacity), when there is one
    top: float = 1.0  # the value at the top of the vertical axis: the highest tick
    left: int = LEFT  # where the plot starts: after the widest tick label
    caption: str = ""  # the axis's unit, written above it when its ticks do not say it
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def summary(self) -> str:
        """For a screen reader (the SVG's <desc>)."""
        if not self.bars:
            return f"{self.title}: no data."
        top = max(self.bars, key=lambda b: b.height)
        span = f"{len(self.bars)} bars from {self.bars[0].label} to {self.bars[-1].label}"
        return f"{self.title}: {span}; highest {top.value} at {top.label}."


@dataclass(frozen=True)
class Axis:
    unit: str
    currency: str = ""
    share: bool = False

    def value(self, amount: float) -> str:
        if self.currency:
            return formats.money(amount, self.currency)
        if self.share:
            return formats.percent(amount)
        return f"{_number(amount)} {self.unit}"

    def tick(self, amount: float, places: int) -> str:
        if self.share:
            places = max(0, places - 2)
            return f"{amount * 100:,.{places}f} %"
        if self.currency:
            return f"{_huge(amount) or f'{amount:,.{max(places, 2)}f}'} {self.currency}"
        return _huge(amount) or f"{amount:,.{places}f}"


def nice_ticks(peak: float, *, least_step: float = 0.0) -> tuple[float, int, int]:
    """About TICKS steps of NICE times a power of ten from 0 past `peak`, no finer than `least_step`, and the
    decimal places that write every one of them."""
    rough = max(peak / TICKS, least_step, 1e-12)
    power = 10.0 ** math.floor(math.log10(rough))
    step = next(m * power for m in NICE if m * power >= rough * (1 - 1e-9))
    count = max(1, math.ceil(peak / step - 1e-9))
    places = max(0, -math.floor(math.log10(step) + 1e-9)) + (1 if round(step / power, 6) == 2.5 else 0)
    return step, count, places


def bar_chart(
    points: Sequence[tuple[str, float]],
    *,
    title: str,
    unit: str,
    limit: float | None = None,
    every: int = 1,
    currency: str = "",
    share: bool = False,
) -> Chart:
    """Bars up to a round top at or above the highest value or `limit`, labelled every `every` bars; a value not
    finite gets none."""
    axis = Axis(unit, currency, share)
    peak = max([v for _, v in points if math.isfinite(v)] + [0])
    highest = max(peak, limit or 0) or 1.0
    least = 0.01 if currency else 0.0001 if share else 0.0
    step, count, places = nice_ticks(highest, least_step=least)
    top = step * count
    if not math.isfinite(top) or not math.isfinite(step):  # values near a float's largest: no rounding up
        step, count, places, top = highest / 2, 2, 0, highest
    ticks = [(i * step, axis.tick(i * step, places)) for i in range(count + 1)]
    left = min(MOST_LEFT, max(LEFT, int(max(len(label) for _, label in ticks) * CHAR_W) + 12))
    plot_w, plot_h = WIDTH - left - 4, HEIGHT - BOTTOM - TOP
    step_x = plot_w / max(len(points), 1)
    caption = "" if currency or share else unit
    chart = Chart(title=title, unit=unit, bars=[], peak=peak or 1.0, top=top, left=left, caption=caption)
    for i, (label, value) in enumerate(points):
        if i % every == 0:
            chart.labels.append((round(left + i * step_x + step_x / 2, 1), label))
        if not math.isfinite(value):
            continue
        h = value / top * plot_h  # divided first: a value near a float's largest would overflow
        x = left + i * step_x
        chart.bars.append(Bar(round(x + step_x * 0.1, 1), round(TOP + plot_h - h, 1), round(step_x * 0.8, 1),
                              round(h, 1), label, axis.value(value), value))  # fmt: skip
    chart.ticks = [(round(TOP + plot_h * (1 - at / top), 1), text) for at, text in ticks]
    if limit and math.isfinite(limit):
        chart.limit_y = round(TOP + plot_h * (1 - limit / top), 1)
    return chart


def _huge(value: float) -> str:
    """In powers of ten ("1.7e+308") a value too large to write digit by digit; "" for any other."""
    return f"{value:.3g}" if abs(value) >= 1e12 else ""


def _number(value: float) -> str:
    if value == 0:
        return "0"
    if huge := _huge(value):
        return huge
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
