"""ops.charts.bar_chart: bars scaled to the highest value, drawn in finite numbers only: a value that is
not a number gets no bar, and values near a float's largest do not overflow."""

import math

from ops.charts import HEIGHT, bar_chart


def coordinates(chart) -> list[float]:
    return [n for bar in chart.bars for n in (bar.x, bar.y, bar.width, bar.height)] + [y for y, _ in chart.ticks]


def test_a_value_that_is_not_a_finite_number_gets_no_bar_but_keeps_its_label():
    chart = bar_chart([("a", 1.0), ("b", math.nan), ("c", math.inf), ("d", 2.0)], title="t", unit="u")

    assert [bar.label for bar in chart.bars] == ["a", "d"]
    assert [label for _, label in chart.labels] == ["a", "b", "c", "d"]
    assert chart.peak == 2.0 and all(math.isfinite(n) for n in coordinates(chart))


def test_values_near_a_floats_largest_are_drawn_to_scale():
    chart = bar_chart([("a", 1e308), ("b", 1.7e308)], title="t", unit="u")

    assert all(math.isfinite(n) for n in coordinates(chart))
    tallest = chart.bars[1]
    assert tallest.y + tallest.height == chart.bars[0].y + chart.bars[0].height < HEIGHT
    assert "nan" not in chart.summary.lower() and "inf" not in chart.summary.lower()
