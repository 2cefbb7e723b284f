"""Staged data names: whatever a browser or script sends, the job sees one plain name under /data."""

import pytest

from jobs.storage.store import MAX_NAME, BadFileName, sanitize_name

HOSTILE = [
    "../../etc/passwd",
    "/abs/path",
    "/etc/shadow",
    "a/../../b.txt",
    "..\\..\\windows\\system32\\config",
    "a\\b",
    ".hidden",
    "...dots",
    "-rf",
    "--help",
    "train\x00.py",
    "line\nbreak.csv",
    "tab\there.txt",
    "naïve café.csv",
    "数据.csv",
    "\u202etxt.exe",  # right-to-left override
    "\uff0e\uff0e\uff0fpasswd",  # full-width "../" that NFKC folds to ASCII
    "x" * 1000 + ".csv",
    "$(rm -rf ~).sh",
    "name with spaces.txt",
]
UNUSABLE = ["", "..", ".", "/", "../", "a/..", "dir/", "\\", "...", "___", "\x00", "\uff0e\uff0e", "\n"]


@pytest.mark.parametrize("raw", HOSTILE)
def test_a_sanitized_name_is_one_plain_file_name(raw):
    name = sanitize_name(raw)

    assert "/" not in name and "\\" not in name
    assert not name.startswith(".") and not name.startswith("-")
    assert name not in ("", ".", "..")
    assert 0 < len(name) <= MAX_NAME
    assert name.isascii() and name.isprintable()


@pytest.mark.parametrize("raw", UNUSABLE)
def test_a_name_with_nothing_usable_is_refused(raw):
    with pytest.raises(BadFileName):
        sanitize_name(raw)


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("../../etc/passwd", "passwd"),
        ("/abs/path", "path"),
        ("C:\\Users\\me\\train.csv", "train.csv"),
        ("a\\b", "b"),
        (".hidden", "hidden"),
        ("-rf", "rf"),
        ("train\x00.py", "train_.py"),
        ("line\nbreak.csv", "line_break.csv"),
        ("naïve café.csv", "na_ve_caf_.csv"),
        ("\uff0e\uff0e\uff0fpasswd", "passwd"),
    ],
)
def test_sanitize_keeps_the_last_path_part_and_replaces_odd_characters(raw, expected):
    assert sanitize_name(raw) == expected


@pytest.mark.parametrize("raw", ["train.py", "train.csv", "model-v2.json", "a_b+c.tar.gz", "UPPER.TXT"])
def test_an_ordinary_name_is_kept_as_it_is(raw):
    assert sanitize_name(raw) == raw


def test_a_very_long_name_is_cut_to_the_limit_keeping_its_extension():
    assert sanitize_name("x" * 1000 + ".csv") == "x" * (MAX_NAME - 4) + ".csv"
    assert sanitize_name("y" * 1000) == "y" * MAX_NAME
    assert sanitize_name("z" * 1000 + "." + "e" * 100) == ("z" * 1000)[:MAX_NAME]


def test_the_refusal_names_the_file():
    with pytest.raises(BadFileName, match=r"'\.\.'"):
        sanitize_name("..")
