"""The short forms of the command line the command line reads itself: memory, figures, arrays, dependencies."""

import pytest

from e31cli import units


@pytest.mark.parametrize(("text", "mb"), [("512M", 512), ("2G", 2048), ("2g", 2048), ("1536", 1536), ("1GiB", 1024)])
def test_memory_sizes(text, mb):
    assert units.memory_mb(text) == mb


@pytest.mark.parametrize("text", ["", "lots", "-1G", "512k", "1.5G", "0"])
def test_bad_memory_sizes(text):
    with pytest.raises(ValueError):
        units.memory_mb(text)


@pytest.mark.parametrize(
    ("column", "value", "shown"),
    [
        ("cost", "0.0000020000000", "0.00"),
        ("cost", "12.345", "12.35"),  # half up, not to even
        ("held_seconds", "0.1390000000", "0.1"),
        ("cpu_seconds", "2.25", "2.3"),
        ("jobs", 3, "3"),
        ("cost", None, "—"),
        ("cost", "n/a", "n/a"),
    ],
)
def test_a_tables_figures_are_rounded_for_reading(column, value, shown):
    assert units.figure(column, value) == shown


@pytest.mark.parametrize(
    ("text", "read"),
    [("0-99%8", ("0-99", 8)), ("1,3,5-7", ("1,3,5-7", None)), ("0-20:5 % 2", ("0-20:5", 2)), (" 4 ", ("4", None))],
)
def test_an_arrays_indices_and_limit(text, read):
    assert units.array(text) == read


@pytest.mark.parametrize("text", ["", "%8", "0-9%", "0-9%0", "0-9%-1", "0-9%x", "0-9%2.5"])
def test_bad_array_specs(text):
    with pytest.raises(ValueError):
        units.array(text)


@pytest.mark.parametrize(
    ("text", "read"),
    [("ok:A", ("after_ok", "A")), ("any: B", ("after_any", "B")), ("NOTOK:C", ("after_not_ok", "C"))],
)
def test_dependencies(text, read):
    assert units.after(text) == read


@pytest.mark.parametrize("text", ["A", "ok:", "afterok:A", "not_ok:A", ":A"])
def test_bad_dependencies(text):
    with pytest.raises(ValueError):
        units.after(text)


def test_an_input_keeps_the_glob_whole():
    assert units.job_input("A:dir/*.json") == "A:dir/*.json"
    assert units.job_input("A:a:b") == "A:a:b"  # the id has no colon; the glob may
    for bad in ("A", "A:", ":*.json"):
        with pytest.raises(ValueError):
            units.job_input(bad)


def test_a_comma_list_and_repeats_are_one_list():
    assert units.listed(["137,out_of_memory", " timed_out ", "a,,b"]) == ["137", "out_of_memory", "timed_out", "a", "b"]
