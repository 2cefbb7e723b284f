"""JSON from people and jobs: too deep a nesting is malformed text, like any other."""

import pytest

from core import json_text


def test_it_parses_what_json_parses():
    assert json_text.parse('{"loss": [0.5, 1]}') == {"loss": [0.5, 1]}
    assert json_text.parse(b"[1]") == [1]


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "{", "nan-ish"])
def test_nesting_past_the_decoder_is_a_value_error_like_any_malformed_text(text):
    with pytest.raises(ValueError):
        json_text.parse(text)
