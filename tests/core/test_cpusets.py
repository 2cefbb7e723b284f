import pytest

from core.cpusets import parse_cpu_list


@pytest.mark.parametrize(
    ("text", "cores"),
    [
        ("0", [0]),
        ("0-3", [0, 1, 2, 3]),
        ("0-3,6", [0, 1, 2, 3, 6]),
        (" 6, 0-1 ,1", [0, 1, 6]),
        ("0-1\n", [0, 1]),  # as /proc/self/status writes it
        ("", []),
    ],
)
def test_a_cpuset_list_gives_sorted_distinct_cores(text, cores):
    assert parse_cpu_list(text) == cores


@pytest.mark.parametrize("text", ["x", "0-", "-1", "3-1", "0-3-5", "1.5", "0;1"])
def test_anything_else_is_a_value_error(text):
    with pytest.raises(ValueError, match="bad cpu list"):
        parse_cpu_list(text)
