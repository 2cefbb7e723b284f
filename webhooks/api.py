"""The webhooks API: a team's webhooks made (the secret shown once), listed, changed, deleted; each one's
delivery log, and a delivery sent again."""

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail, Throttled, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from core.bounds import column_bounds
from teams.access import SignedInAPIRequest, chosen_team, teams_of
from teams.models import Team
from webhooks.access import delivery_of, webhooks_for
from webhooks.actions import clean_events, clean_url, create_webhook
from webhooks.delivery import TooManyRedeliveries, redeliver
from webhooks.hosts import OFF, webhooks_are_on
from webhooks.models import Delivery, Event, Webhook

UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


class WebhookSerializer(serializers.ModelSerializer[Webhook]):
    team: serializers.SlugRelatedField[Team] = serializers.SlugRelatedField(
        slug_field="slug",
        queryset=Team.objects.none(),
        required=False,
        help_text="The team's slug; needed when you are in more than one team. A webhook stays with its team.",
    )
    url = serializers.URLField(
        max_length=2000, help_text="An http(s) URL whose host E31_WEBHOOK_ALLOWED_HOSTS allows, after DNS resolution."
    )
    events = serializers.ListField(child=serializers.ChoiceField(choices=Event.choices), allow_empty=False)
    created_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Webhook
        fields = ["id", "team", "url", "events", "active", "created_by", "created_at"]
        read_only_fields = ["id", "created_by", "created_at"]

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        if (request := self.context.get("request")) is not None:
            team = fields["team"]
            assert isinstance(team, serializers.SlugRelatedField)
            team.queryset = teams_of(request.user)
        return fields

    def validate_url(self, value: str) -> str:
        return clean_url(value)

    def validate_events(self, value: list[str]) -> list[str]:
        return clean_events(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if self.instance is not None:
            if "team" in attrs and attrs["team"] != self.instance.team:
                raise ValidationError({"team": ["A webhook stays with its team: make a new one for another team."]})
            return attrs
        if "team" not in attrs:
            teams = {t.slug: t for t in self.fields["team"].queryset[:2]}  # type: ignore[attr-defined]
            try:
                attrs["team"] = chosen_team(teams, None, none="You are not in any team.")
            except DjangoValidationError as refused:
                raise ValidationError({"team": refused.messages}) from None
        return attrs


class NewWebhookSerializer(WebhookSerializer):
    secret = serializers.CharField(
        read_only=True, help_text="The key of the deliveries' signatures: shown this once, never again."
    )

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class DeliverySerializer(serializers.ModelSerializer[Delivery]):
    id = serializers.UUIDField(source="delivery_id", read_only=True, help_text="Its X-E31-Delivery header.")
    # Plain text: the same five names as a webhook's `events`, one enum in the OpenAPI document.
    event = serializers.CharField(read_only=True, help_text="Its X-E31-Event header: one of a webhook's events.")
    status_class = serializers.ChoiceField(
        choices=Delivery.Answer.choices,
        read_only=True,
        allow_blank=True,
        help_text="What the last attempt got: the class of its HTTP answer, `no answer` (none within 5 s), or "
        "`not allowed` (the URL or a redirect's refused by the allow list); empty: not tried yet.",
    )
    response_code = serializers.IntegerField(
        **column_bounds(Delivery, "response_code"),
        read_only=True,
        allow_null=True,
        help_text="The status code of the last attempt's HTTP answer; null: none.",
    )
    duration_ms = serializers.IntegerField(
        **column_bounds(Delivery, "duration_ms"),
        read_only=True,
        allow_null=True,
        help_text="How long the last attempt took, in milliseconds.",
    )
    redelivery_of = serializers.SlugRelatedField(  # type: ignore[var-annotated]
        slug_field="delivery_id", read_only=True, allow_null=True, help_text="The delivery this one sends again."
    )

    class Meta:
        model = Delivery
        fields = [
            "id", "event", "status", "status_class", "response_code", "duration_ms", "attempts", "created_at",
            "next_attempt_at", "delivered_at", "redelivery_of",
        ]  # fmt: skip
        read_only_fields = fields


class WebhookViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Webhook],
):
    serializer_class = WebhookSerializer
    lookup_value_regex = "[0-9]+"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Webhook]:
        if getattr(self, "swagger_fake_view", False):  # the OpenAPI document is made without a person
            return Webhook.objects.none()
        return webhooks_for(self.request.user)

    @extend_schema(request=WebhookSerializer, responses={201: NewWebhookSerializer})
    def create(self, request: SignedInAPIRequest) -> Response:
        """A webhook of one of your teams; the answer shows its `secret` this once."""
        if not webhooks_are_on():
            raise ValidationError({"non_field_errors": [OFF]})
        given = self.get_serializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        webhook, secret = create_webhook(
            data["team"], url=data["url"], events=data["events"], user=request.user, now=timezone.now()
        )
        shown = NewWebhookSerializer(webhook, context=self.get_serializer_context()).data
        shown["secret"] = secret
        return Response(shown, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer: serializers.BaseSerializer[Webhook]) -> None:
        serializer.validated_data.pop("team", None)
        serializer.save()

    @extend_schema(responses=DeliverySerializer(many=True))
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str | None = None) -> Response:
        """The webhook's delivery log, newest first, paged."""
        webhook = self.get_object()
        rows: QuerySet[Any] = webhook.deliveries.select_related("redelivery_of")  # pages of another model
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(DeliverySerializer(page, many=True).data)

    @extend_schema(
        request=None,
        responses={201: DeliverySerializer},
        parameters=[OpenApiParameter("delivery_id", OpenApiTypes.UUID, OpenApiParameter.PATH)],
    )
    @action(detail=True, methods=["post"], url_path=rf"deliveries/(?P<delivery_id>{UUID})/redeliver")
    def redeliver(self, request: Request, pk: str | None = None, delivery_id: str = "") -> Response:
        """The delivery's event and data sent again, as a new delivery (a new id); at most
        E31_WEBHOOK_REDELIVERIES_PER_MINUTE a minute per webhook (429 with Retry-After)."""
        try:
            again = redeliver(delivery_of(self.get_object(), delivery_id), now=timezone.now())
        except TooManyRedeliveries as exc:
            throttled = Throttled(wait=exc.wait_s)
            throttled.detail = ErrorDetail(str(exc), code=throttled.default_code)  # the setting named, once
            raise throttled from exc
        return Response(DeliverySerializer(again).data, status=status.HTTP_201_CREATED)
