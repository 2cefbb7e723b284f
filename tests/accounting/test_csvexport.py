"""The one CSV writer: every cell that a spreadsheet would take for a formula is neutralised (OWASP's
rule: a leading `'` before `=`, `+`, `-`, `@`, tab, CR); plain numbers and other text are unchanged."""

import csv
import io
from decimal import Decimal

import pytest

from accounting.csvexport import csv_lines, csv_text, safe_cell


@pytest.mark.parametrize(
    "text", ["=1+1", "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A9)", "\t=1", "\r=1", '=HYPERLINK("http://x","y")']
)
def test_text_that_could_start_a_formula_gets_a_leading_quote(text):
    assert safe_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["nightly", "a=b", "", "1e5", "-1.5", "+3", "-0.50", "'quoted"])
def test_other_text_and_plain_numbers_are_unchanged(value):
    assert safe_cell(value) == value


@pytest.mark.parametrize("value", [-1, -1.5, Decimal("-0.25"), None])
def test_numbers_and_none_are_left_to_the_writer(value):
    assert safe_cell(value) == value


def test_csv_lines_writes_safe_quoted_rows_one_line_each():
    lines = list(csv_lines([["name", "cost"], ['=A1,"x"', Decimal("-1.50")]]))

    assert lines == ["name,cost\r\n", '"\'=A1,""x""",-1.50\r\n']


def test_csv_text_reads_back_with_its_header():
    text = csv_text([{"name": "=1+1", "tags": ["a", "b"], "gone": None}], ["name", "tags", "gone"])

    assert list(csv.DictReader(io.StringIO(text))) == [{"name": "'=1+1", "tags": "a,b", "gone": ""}]
