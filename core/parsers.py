"""DRF's JSON parser, answering 400, not 500, for nesting too deep and for lone surrogates."""

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
