"""core.charts.bar_chart: bars scaled to the highest value, drawn in finite numbers only: a value that is
not a number gets no bar, and values near a float's largest do not overflow."""

import math

from core.charts import HEIGHT, bar_chart, line_chart, nice_ticks


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


def tick_labels(chart) -> list[str]:
    return [label for _, label in chart.ticks]


def test_ticks_are_round_steps_from_zero_past_the_highest_value_all_to_the_same_places():
    small = bar_chart([("a", 0.004), ("b", 0.012)], title="t", unit="core-hours")
    hours = bar_chart([("a", 3.0), ("b", 7.2)], title="t", unit="core-hours")

    assert tick_labels(small) == ["0.000", "0.005", "0.010", "0.015"]
    assert tick_labels(hours) == ["0", "2", "4", "6", "8"]
    assert small.caption == "core-hours"  # the unit, written above the axis
    assert small.ticks[0][1] == "0.000" and small.ticks[-1][0] == 22.0  # the top tick is the plot's top


def test_a_money_axis_writes_its_currency_and_no_step_finer_than_a_cent():
    chart = bar_chart([("a", 0.004), ("b", 0.012)], title="Cost", unit="EUR", currency="EUR")

    assert tick_labels(chart) == ["0.00 EUR", "0.01 EUR", "0.02 EUR"]
    assert [bar.value for bar in chart.bars] == ["less than 0.01 EUR", "0.01 EUR"]
    assert chart.left > 48 and chart.caption == ""  # room for "0.00 EUR"; the ticks say the unit


def test_a_share_axis_is_in_percent_up_to_its_limit():
    chart = bar_chart([("a", 0.3447), ("b", 0.12)], title="Utilisation", unit="%", share=True, limit=1.0)

    assert tick_labels(chart) == ["0 %", "25 %", "50 %", "75 %", "100 %"]
    assert chart.bars[0].value == "34.5 %" and chart.limit_y == chart.ticks[-1][0]


def test_all_zero_values_still_draw_an_axis():
    chart = bar_chart([("a", 0.0), ("b", 0.0)], title="t", unit="u")

    assert tick_labels(chart)[0] == "0.00" and chart.peak == 1.0 and all(bar.height == 0 for bar in chart.bars)


def test_nice_ticks_pick_one_two_two_and_a_half_or_five_times_a_power_of_ten():
    assert nice_ticks(0.3447) == (0.1, 4, 1)
    assert nice_ticks(12) == (5.0, 3, 0)
    assert nice_ticks(1) == (0.25, 4, 2)
    assert nice_ticks(0.0052, least_step=0.01) == (0.01, 1, 2)
