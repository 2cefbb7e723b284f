"""Django's {# #} comment is one line only: opened and not closed on its line, the rest is printed on the page
(the operator panel once showed its comment, with the repr of its rows inside). A longer one is {% comment %}."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_DIRS = [ROOT / "templates", *ROOT.glob("*/templates")]


def unclosed_comments(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if re.search(r"\{#(?!.*#\})", line)]


def test_no_template_opens_a_one_line_comment_it_does_not_close_on_that_line():
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for folder in TEMPLATE_DIRS
        for path in sorted(folder.rglob("*.html"))
        for n in unclosed_comments(path.read_text())
    ]
    assert found == []


def test_the_check_sees_a_comment_left_open():
    assert unclosed_comments("{# one #}\n{# two\nlines #}\n") == [2]
