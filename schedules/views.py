"""/schedules/: the schedules of the person's teams, their runs, forecast and audit; make one (of a job's
fields or a template), change it, pause, resume, delete it or run it now. Adapters over schedules.changes
and schedules.runs, the functions the API calls."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from core.pagination import page_or_404
from jobs.web.views import PageRequest
from schedules import cron, listing
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
from schedules.forms import ScheduleForm
from schedules.models import RunStatus, Schedule, ScheduleEvent
from schedules.runs import run_now as record_run_now
from teams.access import teams_of

PAGE_SIZE = 25
DELETED_SHOWN = 10


@require_http_methods(["GET", "POST"])
@login_required
def schedule_list(request: PageRequest) -> HttpResponse:
    form = ScheduleForm(request.POST if request.method == "POST" else None, user=request.user)
    if request.method == "POST":
        if not form.is_valid():
            return _page(request, form, status=400)
        try:
            made = create_schedule(**form.validated, by=request.user, now=timezone.now())
        except TooManySchedules as exc:
            form.add_error(None, str(exc))
            return _page(request, form, status=409)
        messages.success(request, f"Made the schedule {made.name}.")
        return redirect(f"{reverse('schedules:list')}#schedule-{made.pk}")
    return _page(request, form)


def _page(request: PageRequest, form: ScheduleForm, *, status: int = 200) -> HttpResponse:
    now = timezone.now()
    schedules = listing.with_events(listing.shown(visible_schedules(request.user)))
    page = page_or_404(Paginator(schedules, PAGE_SIZE), request.GET.get("page"))
    deleted = ScheduleEvent.objects.filter(
        team__in=teams_of(request.user), action=ScheduleEvent.Action.DELETED
    ).select_related("actor", "team")[:DELETED_SHOWN]
    context = {"page": page, "rows": listing.rows(page.object_list, now=now), "deleted": deleted, "form": form,
               "more_open": form.has_job_errors()}  # fmt: skip
    return render(request, "schedules/schedules.html", context, status=status)


def _row(request: PageRequest, schedule: Schedule) -> HttpResponse:
    if not request.htmx:
        return redirect("schedules:list")
    shown = listing.with_events(listing.shown(Schedule.objects.filter(pk=schedule.pk))).get()
    row = listing.rows([shown], now=timezone.now())[0]
    return render(request, "schedules/partials/schedule_row.html", {"row": row})


@require_POST
@login_required
def pause(request: PageRequest, schedule_id: int) -> HttpResponse:
    schedule = pause_schedule(schedule_for(request.user, schedule_id), by=request.user, now=timezone.now())
    messages.success(request, f"Paused {schedule.name}: no run is submitted until it is resumed.")
    return _row(request, schedule)


@require_POST
@login_required
def resume(request: PageRequest, schedule_id: int) -> HttpResponse:
    schedule = schedule_for(request.user, schedule_id)
    try:
        schedule = resume_schedule(schedule, by=request.user, now=timezone.now())
    except cron.BadCron as exc:  # a line saved before the checks refused it
        messages.error(request, f"Not resumed: {exc} Give {schedule.name} a standard line with the API.")
        return _row(request, schedule)
    messages.success(request, f"Resumed {schedule.name}: the times passed while paused are not caught up.")
    return _row(request, schedule)


@require_http_methods(["GET", "POST"])
@login_required
def edit(request: PageRequest, schedule_id: int) -> HttpResponse:
    schedule = schedule_for(request.user, schedule_id)
    if request.method == "GET":
        form = ScheduleForm(user=request.user, schedule=schedule)
        return render(request, "schedules/schedule_edit.html", {"form": form, "schedule": schedule})
    form = ScheduleForm(request.POST, user=request.user, schedule=schedule)
    if not form.is_valid():
        context = {"form": form, "schedule": schedule, "more_open": form.has_job_errors()}
        return render(request, "schedules/schedule_edit.html", context, status=400)
    changes = {name: value for name, value in form.validated.items() if name in CHANGEABLE}
    changed = change_schedule(schedule, changes=changes, by=request.user, now=timezone.now())
    messages.success(request, f"Changed the schedule {changed.name}.")
    return redirect(f"{reverse('schedules:list')}#schedule-{changed.pk}")


@require_http_methods(["GET", "POST"])
@login_required
def delete(request: PageRequest, schedule_id: int) -> HttpResponse:
    """GET asks first, on a page of its own (no script needed); POST deletes."""
    schedule = schedule_for(request.user, schedule_id)
    if request.method == "GET":
        context = {"schedule": schedule, "submitted": listing.submitted_runs(schedule)}
        return render(request, "schedules/schedule_delete.html", context)
    delete_schedule(schedule, by=request.user, now=timezone.now())
    messages.success(request, f"Deleted the schedule {schedule.name}: the jobs it submitted stay.")
    return redirect("schedules:list")


@require_POST
@login_required
def run_now(request: PageRequest, schedule_id: int) -> HttpResponse:
    schedule = schedule_for(request.user, schedule_id)
    try:
        run = record_run_now(schedule, by=request.user, now=timezone.now())
    except Schedule.DoesNotExist:  # deleted between the read above and the run's lock
        raise Http404("No such schedule.") from None
    made = run.job or run.array
    stays = f" {schedule.name} stays paused: no planned run until it is resumed." if schedule.paused else ""
    if run.status == RunStatus.SUBMITTED and made is not None:
        ran = "once now" if schedule.paused else "now"
        runner = schedule.runs_as.username
        messages.success(request, f"Ran {schedule.name} {ran}: submitted {made.name}, as {runner}.{stays}")
    else:
        messages.error(request, f"{schedule.name} was not run now: {run.reason}{stays}")
    return _row(request, schedule)
