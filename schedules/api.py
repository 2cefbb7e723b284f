"""The schedules API (v1): adapters over schedules.serializers (the checks) and schedules.changes."""

from typing import Any

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from accounting.rates import RateBook
from schedules import listing
from schedules.access import schedule_for, visible_schedules
from schedules.caps import TooManySchedules
from schedules.changes import (
    CHANGEABLE,
    change_schedule,
    create_schedule,
    delete_schedule,
    pause_schedule,
    resume_schedule,
)
from schedules.models import Schedule
from schedules.serializers import ScheduleRequest, ScheduleRunSerializer, ScheduleSerializer
from teams.access import SignedInAPIRequest


class ScheduleViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet[Schedule]
):
    serializer_class = ScheduleSerializer
    lookup_value_regex = "[0-9]+"
    http_method_names = ["get", "post", "patch", "delete", "head", "options"]

    def get_queryset(self) -> QuerySet[Schedule]:
        return listing.shown(visible_schedules(self.request.user))

    def get_object(self) -> Schedule:
        found = schedule_for(self.request.user, self.kwargs["pk"])
        return listing.shown(Schedule.objects.filter(pk=found.pk)).get()

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "now": timezone.now(), "book": RateBook.load(), "teams": {}}

    def _answer(self, schedules: list[Schedule], *, many: bool) -> Any:
        context = self.get_serializer_context()
        context["teams"] = listing.budgets_of((s.team for s in schedules), now=context["now"])
        return ScheduleSerializer(schedules if many else schedules[0], many=many, context=context).data

    def list(self, request: Request, *args: object, **kwargs: object) -> Response:
        """The schedules of the caller's teams, by team and name, paged."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(self._answer(list(page or []), many=True))

    def retrieve(self, request: Request, *args: object, **kwargs: object) -> Response:
        return Response(self._answer([self.get_object()], many=False))

    @extend_schema(
        request=ScheduleRequest,
        responses={
            201: ScheduleSerializer,
            409: OpenApiResponse(description="The team has as many schedules as E31_TEAM_MAX_SCHEDULES allows."),
        },
    )
    def create(self, request: SignedInAPIRequest) -> Response:
        """Declare a schedule: each time its cron line names, in its time zone, it submits its template or job."""
        given = ScheduleRequest(data=request.data, context={"user": request.user})
        given.is_valid(raise_exception=True)
        try:
            made = create_schedule(**given.validated_data, by=request.user, now=timezone.now())
        except TooManySchedules as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        shown = listing.shown(Schedule.objects.filter(pk=made.pk)).get()
        return Response(self._answer([shown], many=False), status=status.HTTP_201_CREATED)

    @extend_schema(request=ScheduleRequest, responses={200: ScheduleSerializer})
    def partial_update(self, request: SignedInAPIRequest, pk: str | None = None) -> Response:
        """Change any of the fields of POST; `paused` pauses or resumes it (each change an audit event)."""
        schedule = schedule_for(request.user, self.kwargs["pk"])
        context = {"user": request.user, "schedule": schedule}
        given = ScheduleRequest(data=request.data, partial=True, context=context)
        given.is_valid(raise_exception=True)
        now = timezone.now()
        changes = {name: value for name, value in given.validated_data.items() if name in CHANGEABLE}
        with transaction.atomic():  # the fields and the pause (or resume) together, or neither
            schedule = change_schedule(schedule, changes=changes, by=request.user, now=now)
            if given.validated_data.get("paused") is True:
                pause_schedule(schedule, by=request.user, now=now)
            elif given.validated_data.get("paused") is False:
                resume_schedule(schedule, by=request.user, now=now)
        return Response(self._answer([self.get_object()], many=False))

    def destroy(self, request: Request, *args: object, **kwargs: object) -> Response:
        """Delete a schedule and its runs' records; the jobs it made and its audit events stay."""
        delete_schedule(schedule_for(request.user, self.kwargs["pk"]), by=request.user, now=timezone.now())  # type: ignore[arg-type]
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=ScheduleRunSerializer(many=True))
    @action(detail=True, methods=["get"])
    def runs(self, request: Request, pk: str | None = None) -> Response:
        """Each planned time recorded, newest first, paged: submitted (with its job or array), skipped,
        missed or refused (with the reason)."""
        schedule = schedule_for(request.user, self.kwargs["pk"])
        runs = listing.runs_shown(schedule.runs.order_by("-planned_at"))
        page = self.paginate_queryset(runs)  # type: ignore[arg-type]  # a page of the schedule's runs
        return self.get_paginated_response(ScheduleRunSerializer(page, many=True).data)
