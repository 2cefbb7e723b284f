"""The API's JSON parser: DRF's, with a body nested deeper than Python's decoder recurses (`[[[[…`,
a few hundred kilobytes) answered as the malformed body it is (400), not a RecursionError (a 500); and
a string with a lone surrogate (`"\\ud800"`, which JSON's escapes allow and UTF-8 cannot hold) refused
as the text that is not, rather than failing when the database or the answer encodes it (a 500)."""

from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from core.json_text import is_unicode


class JSONParser(parsers.JSONParser):
    def parse(
        self, stream: IO[Any], media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        try:
            parsed = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        if not is_unicode(parsed):
            raise ParseError(
                "JSON parse error - a string holds a lone surrogate (\\ud800 to \\udfff): not Unicode text."
            )
        return parsed
