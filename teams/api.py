"""The tokens API: a person makes, names, lists and revokes their own keys; operators revoke anyone's."""

import django_filters
from django.contrib.auth.models import User
from django.db.models import Q, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from core.filters import when_filter
from core.names import showable_name
from teams.access import SignedInAPIRequest
from teams.models import ApiToken
from teams.tokens import issue_token, revocable_token, tokens_for


class TokenSerializer(serializers.ModelSerializer[ApiToken]):
    user: serializers.SlugRelatedField[User] = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = ApiToken
        fields = ["id", "name", "prefix", "user", "created_at"]
        read_only_fields = ["id", "prefix", "user", "created_at"]
        extra_kwargs = {"name": {"required": True, "allow_blank": False, "validators": [showable_name]}}


class NewTokenSerializer(TokenSerializer):
    key = serializers.CharField(read_only=True, help_text="The key: shown this once, only its sha256 is kept.")

    class Meta(TokenSerializer.Meta):
        fields = [*TokenSerializer.Meta.fields, "key"]


class TokenFilter(django_filters.FilterSet):
    user = django_filters.CharFilter(
        field_name="user__username", max_length=150, help_text="A username (operators see everyone's tokens)."
    )
    since = when_filter("created_at", "gte", "Made from", "Made at or after: an ISO 8601 date or date-time.")
    until = when_filter("created_at", "lt", "Made before", "Made before: an ISO 8601 date or date-time.")
    q = django_filters.CharFilter(method="search", max_length=100, help_text="Words in the token's name or prefix.")

    class Meta:
        model = ApiToken
        fields: list[str] = []

    def search(self, queryset: QuerySet[ApiToken], name: str, value: str) -> QuerySet[ApiToken]:
        for word in value.split():
            queryset = queryset.filter(Q(name__icontains=word) | Q(prefix__startswith=word))
        return queryset


class TokenViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[ApiToken]
):
    serializer_class = TokenSerializer
    filterset_class = TokenFilter
    lookup_value_regex = "[0-9]+"

    def get_queryset(self) -> QuerySet[ApiToken]:
        if getattr(self, "swagger_fake_view", False):  # the OpenAPI document is made without a person
            return ApiToken.objects.none()
        return tokens_for(self.request.user)  # type: ignore[arg-type]  # past IsAuthenticated

    def get_object(self) -> ApiToken:
        return revocable_token(self.request.user, self.kwargs["pk"])  # type: ignore[arg-type]

    @extend_schema(request=TokenSerializer, responses={201: NewTokenSerializer})
    def create(self, request: SignedInAPIRequest) -> Response:
        given = TokenSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        token, key = issue_token(request.user, name=given.validated_data["name"])
        token.key = key  # type: ignore[attr-defined]  # shown once, never stored
        return Response(NewTokenSerializer(token).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Revoke a token (yours; an operator, anyone's): its key stops working at once."""
        return super().destroy(request, *args, **kwargs)
