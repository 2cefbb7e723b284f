"""The usage API with each of the caller's teams' store use against its quota."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from accounting import api
from accounting.models import StoreQuota
from core.bounds import COUNT, column_bounds
from jobs.storage.quotas import store_standings
from teams.access import is_operator, teams_of
from teams.models import Team


class StoreStandingSerializer(serializers.Serializer):
    team = serializers.CharField()
    store_used_bytes = serializers.IntegerField(**COUNT)
    store_quota_bytes = serializers.IntegerField(**column_bounds(StoreQuota, "quota_bytes"))


class UsageWithStoreSerializer(api.UsageSerializer):
    store = StoreStandingSerializer(many=True)


class UsageView(api.UsageView):
    """The records aggregated (`rows`), and `store`: each visible team's store use against its quota."""

    @extend_schema(parameters=api.USAGE_PARAMETERS, responses={200: UsageWithStoreSerializer})
    def get(self, request: Request) -> Response:
        response = super().get(request)
        teams = Team.objects.all() if is_operator(request.user) else teams_of(request.user)
        response.data["store"] = [standing.as_dict() for standing in store_standings(teams, now=timezone.now())]
        return response
