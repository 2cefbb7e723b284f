"""A name others read in a list shows as itself: no control character, line break or bidirectional control."""

import pytest
from django.core.exceptions import ValidationError

from core.names import showable_name, unshowable


@pytest.mark.parametrize("name", ["nightly retrain", "Ночной 夜间 مرحبا", "🧑‍🔬 lab", "tab-less, 100% [ok]"])
def test_text_in_any_script_with_emoji_and_joiners_shows_as_itself(name):
    assert unshowable(name) is None
    showable_name(name)


@pytest.mark.parametrize(
    ("name", "char"),
    [("a\x00b", "\x00"), ("a\x1b[2J", "\x1b"), ("a\rb", "\r"), ("a\tb", "\t"), ("a\x85b", "\x85"),
     ("a\u2028b", "\u2028"), ("txt.\u202eexe", "\u202e"), ("a\u2067b", "\u2067"), ("a\u200fb", "\u200f")],
)  # fmt: skip
def test_a_control_character_line_break_or_bidi_control_is_named(name, char):
    assert unshowable(name) == char
    with pytest.raises(ValidationError) as refused:
        showable_name(name)
    assert f"U+{ord(char):04X}" in refused.value.messages[0]
