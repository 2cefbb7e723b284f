"""core.charts.bar_chart: bars scaled to the highest value, drawn in finite numbers only: a value that is
not a number gets no bar, and values near a float's largest do not overflow."""

import math

from core.charts import HEIGHT, bar_chart, line_chart


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


def test_a_line_runs_from_the_lowest_value_at_the_bottom_to_the_highest_at_the_top():
    line = line_chart("loss", [3.0, 1.0, 2.0])

    assert line.points == "4.0,4.0 120.0,44.0 236.0,24.0"
    assert line.last == ("236.0", "24.0")


def test_one_value_or_the_widest_span_of_floats_draws_finite_points():
    assert line_chart("one", [5.0]).points == "4.0,44.0"
    assert "nan" not in line_chart("wide", [-1e308, 1e308]).points.lower()
