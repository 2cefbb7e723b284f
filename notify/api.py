"""The notifications API (v1): a person's own mail choices, read and replaced (PUT)."""

from typing import Any

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import Direction, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from core.outcomes import Outcome
from core.parsers import JSONParser
from notify.models import Preference
from notify.preferences import mail_is_on, preference_of, set_preferences
from teams.access import SignedInAPIRequest


class PreferenceSerializer(serializers.Serializer):
    """A person's mail: which job endings, and the morning digest. Fields it does not know are refused, so a
    misspelt one is not silently left at its old value."""

    email_on = serializers.ListField(
        child=serializers.ChoiceField(choices=Outcome.choices),
        allow_empty=True,
        max_length=len(Outcome.choices) * 2,
        help_text="the outcomes a job or array of yours is mailed for when it ends (an array: its worst)",
    )
    digest = serializers.BooleanField(help_text="the morning digest, and the team's budget warnings")
    digest_hour = serializers.IntegerField(min_value=0, max_value=23, help_text="0–23, in the team's time zone")
    email = serializers.CharField(read_only=True, help_text="your address, where mail goes (empty: no mail)")
    mail_on = serializers.BooleanField(read_only=True, help_text="false: no SMTP server is set, no mail is sent")

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict):
            known = set(self.fields)
            if unknown := sorted(str(name) for name in data if name not in known):
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return super().to_internal_value(data)

    def to_representation(self, preference: Preference) -> dict[str, Any]:
        shown = {
            "email_on": list(preference.email_on), "digest": preference.digest,
            "digest_hour": preference.digest_hour, "email": preference.user.email, "mail_on": mail_is_on(),
        }  # fmt: skip
        return super().to_representation(shown)


class PreferenceSchema(OpenApiSerializerExtension):
    """The document says what the serializer does: no other field is taken (additionalProperties false)."""

    target_class = PreferenceSerializer

    def map_serializer(self, auto_schema: AutoSchema, direction: Direction) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": False}


class NotificationsView(APIView):
    serializer_class = PreferenceSerializer
    parser_classes = [JSONParser]  # a form would drop an empty email_on, which is a choice of its own

    @extend_schema(responses=PreferenceSerializer)
    def get(self, request: SignedInAPIRequest) -> Response:
        """Your mail choices, your address, and whether mail is sent at all."""
        return Response(PreferenceSerializer(preference_of(request.user)).data)

    @extend_schema(request=PreferenceSerializer, responses=PreferenceSerializer)
    def put(self, request: SignedInAPIRequest) -> Response:
        """Replace your mail choices: every field but the read-only `email` and `mail_on`."""
        given = PreferenceSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        found = set_preferences(request.user, **given.validated_data)
        return Response(PreferenceSerializer(found).data)
