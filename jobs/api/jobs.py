"""The jobs API (v1): adapters over jobs.submit.forms, jobs.submit.service, jobs.lifecycle.actions and jobs.access."""

import uuid
from typing import Any, TypeVar

from django.db.models import QuerySet, prefetch_related_objects
from django.http import FileResponse, Http404, HttpResponse, HttpResponseRedirect
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import APIException, ValidationError
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.request import Request
from rest_framework.response import Response

from accounting.rates import RateBook
from core.parsers import JSONParser
from jobs.access import job_for, job_in, output_for, visible_jobs
from jobs.api.filters import JobFilter
from jobs.api.serializers import (
    EstimateRequest,
    EstimateSerializer,
    JobEventSerializer,
    JobResubmission,
    JobSerializer,
    JobSubmission,
    LogQuery,
    OutputFileSerializer,
    shown_relations,
    with_schedule,
)
from jobs.lifecycle import actions
from jobs.lifecycle.history import events_of
from jobs.models import Job, OutputFile
from jobs.storage import logs
from jobs.storage.retention import PinRefused, pin
from jobs.storage.store import open_stream, output_key, presigned_url
from jobs.submit.again import resubmit_data
from jobs.submit.forms import JobForm
from jobs.submit.service import MAX_IDEMPOTENCY_KEY, IdempotencyKeyReused, submit
from jobs.submit.uploads import refused_upload, unnamed_files
from teams.access import SignedInAPIRequest

F = TypeVar("F", bound=JobForm)


def submitted_form(request: SignedInAPIRequest, form_class: type[F], *, reuse_from: Job | None = None) -> tuple[F, str]:
    """A submission's form, valid, and its Idempotency-Key; else the API's 413 or 400 (the body is read first: the
    upload's limits are known once it is). With `reuse_from`, the body holds only the fields it changes."""
    data = request.data
    if why := refused_upload(request):
        raise UploadTooLarge(why)
    key = request.headers.get("Idempotency-Key", "")
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise ValidationError({"Idempotency-Key": [f"At most {MAX_IDEMPOTENCY_KEY} characters."]})
    if not hasattr(data, "get"):
        raise ValidationError({"non_field_errors": ["The body must be a form or a JSON object."]})
    if reuse_from is not None:
        data = resubmit_data(reuse_from, data)
    form = form_class(data, request.FILES, user=request.user, unnamed=unnamed_files(request), reuse_from=reuse_from)
    if not form.is_valid():
        raise ValidationError(form_errors(form))
    return form, key


def form_errors(form: JobForm) -> dict[str, list[str]]:
    """A form's errors in DRF's shape: the form's own under non_field_errors."""
    return {"non_field_errors" if f == "__all__" else f: [*e] for f, e in form.errors.items()}


class UploadTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "The upload is too large."


class KeyReused(APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "This Idempotency-Key was used for a job you can no longer see."


class KeyReusedForAnotherRequest(APIException):
    """The same key with a different body (as the IETF Idempotency-Key draft answers it)."""

    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_detail = "This Idempotency-Key was sent before with a different request: use a new key for a new job."


class JobViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet[Job]):
    serializer_class = JobSerializer
    parser_classes = [MultiPartParser, FormParser, JSONParser]
    lookup_value_regex = "[0-9a-fA-F-]{36}"
    # The list's filters only: a job's own URL (get_object) shows it whatever query string it carries.
    filterset_class = JobFilter

    def get_queryset(self) -> QuerySet[Job]:
        jobs = with_schedule(visible_jobs(self.request.user).select_related("team", "image", "cancelled_by", "queue"))
        if self.action in ("cancel", "pin"):  # their answer shows the job's relations as the action left them
            return jobs
        return jobs.prefetch_related(*shown_relations()).order_by("-submitted_at", "-id")

    def get_serializer_context(self) -> dict[str, Any]:
        # A list reads the rate card once for its rows; only a single job's answer says where it stands
        # in the queue (a list would redo it per row).
        book = RateBook.load() if self.action == "list" else None
        return {**super().get_serializer_context(), "explain": self.action == "retrieve", "book": book}

    def get_object(self) -> Job:
        return job_in(self.get_queryset(), self.kwargs["pk"])

    def _shown(self, job: Job) -> dict[str, Any]:
        """The job an action returned, with the relations its answer shows read after the action."""
        prefetch_related_objects([job], *shown_relations())
        return self.get_serializer(job).data

    @extend_schema(
        request={"multipart/form-data": JobSubmission, "application/json": JobSubmission},
        responses={201: JobSerializer, 200: JobSerializer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    def create(self, request: SignedInAPIRequest) -> Response:
        return submitted(self, request, *submitted_form(request, JobForm))

    @extend_schema(
        request={"multipart/form-data": JobResubmission, "application/json": JobResubmission},
        responses={201: JobSerializer, 200: JobSerializer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    @action(detail=True, methods=["post"], filter_backends=[], pagination_class=None)
    def resubmit(self, request: SignedInAPIRequest, pk: str | None = None) -> Response:
        """Submit the job again as a new job, with the fields the body sends changed: every other field as the
        job declared it, its data files staged again from the store (not uploaded). Checked as a submission is."""
        earlier = job_for(request.user, pk)
        return submitted(self, request, *submitted_form(request, JobForm, reuse_from=earlier))

    @extend_schema(request=EstimateRequest, responses={200: EstimateSerializer})
    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def estimate(self, request: SignedInAPIRequest) -> Response:
        """The worst case of a job before it is submitted: its request held for its whole time limit."""
        asked = EstimateRequest(data=request.data)
        asked.is_valid(raise_exception=True)
        return Response(asked.estimate(now=timezone.now()).as_dict())

    @extend_schema(request=None, responses={200: JobSerializer})
    @action(detail=True, methods=["post"])
    def pin(self, request: SignedInAPIRequest, pk: str | None = None) -> Response:
        """Keep a released job's outputs the team's pin_days longer (when operators allow it: else 409)."""
        try:
            job = pin(self.get_object(), now=timezone.now())
        except PinRefused as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(self._shown(job))

    @extend_schema(request=None, responses={202: JobSerializer})
    @action(detail=True, methods=["post"])
    def cancel(self, request: SignedInAPIRequest, pk: str | None = None) -> Response:
        job = actions.cancel(self.get_object(), now=timezone.now(), acting_user=request.user)
        return Response(self._shown(job), status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[LogQuery],
        responses={(200, "text/plain"): OpenApiTypes.STR},
    )
    @action(detail=True, methods=["get"])
    def logs(self, request: Request, pk: str | None = None) -> HttpResponse:
        job = job_for(request.user, pk)
        query = LogQuery(data=request.query_params.dict())  # a dict: `offset=` is no number, not left out
        query.is_valid(raise_exception=True)
        data, next_offset = logs.read_log(job.pk, query.validated_data["offset"])
        response = HttpResponse(data, content_type="text/plain; charset=utf-8")
        response["X-Next-Offset"] = str(next_offset)
        response["X-Job-Stage"] = job.stage
        return response

    @extend_schema(responses=OutputFileSerializer(many=True))
    # Not the job list: neither its filters nor its pages (which the OpenAPI document would otherwise show).
    @action(detail=True, methods=["get"], url_path="outputs", filter_backends=[], pagination_class=None)
    def outputs(self, request: Request, pk: str | None = None) -> Response:
        job = job_for(request.user, pk)
        return Response(OutputFileSerializer(job.output_files.all(), many=True).data)

    @extend_schema(responses=JobEventSerializer(many=True))
    # The whole history, not paged: a job has a handful of events per attempt, and attempts are few.
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def events(self, request: Request, pk: str | None = None) -> Response:
        """The job's history, oldest first: every change, the attempt it belongs to and who acted."""
        job = job_for(request.user, pk)
        return Response(JobEventSerializer(events_of(job), many=True).data)

    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiTypes.BINARY,
            302: OpenApiResponse(description="A big output of an S3 store: Location is a short-lived presigned URL."),
        }
    )
    def output_file(
        self, request: Request, pk: uuid.UUID | None = None, path: str = ""
    ) -> FileResponse | HttpResponseRedirect:
        """One output file (routed in jobs/urls.py's api_urlpatterns: its path has no trailing slash)."""
        return output_response(output_for(request.user, pk, path))


def submitted(
    view: viewsets.GenericViewSet, request: SignedInAPIRequest, form: JobForm, key: str, **array: Any
) -> Response:
    """Submit a valid form (a job's, or with `array` an array's) with its Idempotency-Key: 201 made, 200 what the
    key made, as `view` shows it."""
    try:
        made, created = submit(form.declaration(), user=request.user, idempotency_key=key, **array)
    except IdempotencyKeyReused as exc:
        if not view.get_queryset().filter(pk=exc.made.pk).exists():
            raise KeyReused() from None  # of a team the caller has left: say that, not what differs
        raise KeyReusedForAnotherRequest() from None
    if created:  # shown with the worst case its budget was checked against
        return Response(view.get_serializer(made).data, status=status.HTTP_201_CREATED)
    found = view.get_queryset().filter(pk=made.pk).first()
    if found is None:  # what the key made is of a team the caller has left since
        raise KeyReused()
    return Response(view.get_serializer(found).data)


def output_response(output: OutputFile) -> FileResponse | HttpResponseRedirect:
    """One collected output of a job (found through jobs.access.output_for, so another team's is 404 before
    any URL is made): streamed from the store, or a big one a redirect to a short-lived presigned URL."""
    key, filename = output_key(output.job_id, output.path), output.path.rsplit("/", 1)[-1]
    if url := presigned_url(key, size=output.size, filename=filename):
        return HttpResponseRedirect(url)
    try:
        handle = open_stream(key)
    except FileNotFoundError:
        raise Http404("The output is no longer in the store.") from None
    response = FileResponse(handle, as_attachment=True, filename=filename)
    response["Content-Length"] = output.size  # an S3 body cannot tell its length
    response["X-Checksum-Sha256"] = output.sha256
    # An output is the job's data, never a page of the site: whatever its name says, it is not served as
    # HTML, SVG or XML, the browser may not sniff it into one, and were it shown it could run nothing.
    if any(kind in response["Content-Type"] for kind in ("html", "xml", "svg", "javascript")):
        response["Content-Type"] = "application/octet-stream"
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response
