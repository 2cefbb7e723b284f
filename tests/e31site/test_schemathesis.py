"""Schemathesis against the live /api/schema/ with every check (`schemathesis run --checks all` and the
acceptance of valid data): generated requests to every operation (as a member, with a team, a job with
outputs and a node to find), valid ones and invalid ones, never get a 5xx; every answer's status,
schema, content type and headers are documented; what the document allows is accepted, what it
refuses is refused (4xx). Derandomized, so a run is the same run every time."""

import hypothesis
import pytest
import schemathesis
from schemathesis import DataGenerationMethod, checks
from schemathesis.runner import events
from schemathesis.specs.openapi import checks as openapi_checks

from teams.models import ApiToken
from teams.tokens import issue_token
from tests.factories import RuntimeImageFactory, submit_job

EXAMPLES_PER_OPERATION = 12
# Whether a valid request is taken depends on the data here, not on the document: a submission (a job's or
# an array's, and an estimate) names a registered image and must fit the pool and the team's budget; a statement needs
# `team` from a member, not from an operator; a token's name of only spaces is blank once trimmed; a webhook's URL
# must pass the allow list after DNS resolution.
DEPENDS_ON_DATA = {
    "POST /api/v1/jobs/",
    "POST /api/v1/arrays/",
    "POST /api/v1/jobs/estimate/",
    "GET /api/v1/accounting/statements/",
    "POST /api/v1/tokens/",
    "POST /api/v1/webhooks/",
    "PATCH /api/v1/webhooks/{id}/",
    # A schedule's cron line, template and job are checked against the pool and the team's templates.
    "POST /api/v1/schedules/",
    "PATCH /api/v1/schedules/{id}/",
}


def positive_data_acceptance(ctx, response, case):
    """Schemathesis's check that a request valid by the document is accepted (2xx, 401, 403, 404)."""
    if f"{case.method} {case.path}" in DEPENDS_ON_DATA:
        return None
    return openapi_checks.positive_data_acceptance(ctx, response, case)


def negative_data_rejection(ctx, response, case):
    """Schemathesis's check that a request invalid by the document is refused (4xx), but for unknown
    query parameters and empty values, which every list ignores by design (docs/api.md, "Lists")."""
    known = {parameter.name for parameter in case.operation.query}
    query = case.query or {}
    if set(query) - known or any(value in ("", [""]) for value in query.values()):
        return None
    return openapi_checks.negative_data_rejection(ctx, response, case)


# ignored_auth asks again without credentials, but schemathesis 3 sends the runner's Authorization
# header with it still: every answer would be taken for auth not enforced. That every endpoint refuses a
# request without a token is tested in test_api_docs.py (test_every_endpoint_needs_a_token).
REPLACED = {"negative_data_rejection", "ignored_auth"}
CHECKS = (
    *(check for check in checks.ALL_CHECKS if check.__name__ not in REPLACED),
    negative_data_rejection,
    positive_data_acceptance,
)


@pytest.fixture
def key(transactional_db, settings, member, team, local_node):
    # Generated requests come fast: no rate stops them (the rates have tests of their own).
    settings.E31_API_THROTTLE_RATES = {k: None for k in settings.E31_API_THROTTLE_RATES}
    RuntimeImageFactory()
    submit_job(member, team, files={"train.csv": "a,b\n1,2\n"})
    token, key = issue_token(member, name="schemathesis")
    # Far from the small ids generated for DELETE /api/v1/tokens/{id}/, so the run keeps its own key.
    ApiToken.objects.filter(pk=token.pk).update(id=2_000_000_000)
    return key


def test_generated_requests_get_no_5xx_and_conforming_answers(live_server, key):
    schema = schemathesis.from_uri(
        f"{live_server.url}/api/schema/?format=json",
        base_url=live_server.url,
        data_generation_methods=[DataGenerationMethod.positive, DataGenerationMethod.negative],
    ).exclude(path="/api/schema/")  # drf-spectacular's own view: the API is /api/v1/
    runner = schemathesis.runner.from_schema(
        schema,
        checks=CHECKS,
        headers={"Authorization": f"Token {key}"},
        hypothesis_settings=hypothesis.settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(hypothesis.HealthCheck),
        ),
        request_timeout=30_000,
    )
    problems: dict[str, str] = {}  # each operation's failed check → its first example
    tested = set()
    for event in runner.execute():
        if isinstance(event, events.AfterExecution):
            tested.add(f"{event.method} {event.path}")
            for check in event.result.checks:
                if check.value.name != "success":
                    ctx = check.context
                    detail = f"{getattr(ctx, 'validation_message', '')} at {getattr(ctx, 'instance_path', '')}"
                    if check.response is not None:  # what was asked and answered, to reproduce it
                        answered = f"{check.response.status_code} {check.response.headers.get('Content-Type')}"
                        detail += f" ({check.request.method} {check.request.uri} → {answered})"
                    problems.setdefault(f"{event.method} {event.path}: {check.name}", f"{check.message} {detail}")
            for error in event.result.errors:
                problems.setdefault(f"{event.method} {event.path}: error", str(error.exception))
        elif isinstance(event, events.Finished):
            problems.update({f"generic error {i}": str(e.exception) for i, e in enumerate(event.generic_errors)})

    assert {"POST /api/v1/jobs/", "GET /api/v1/jobs/", "POST /api/v1/tokens/"} <= tested
    assert not problems, "\n".join(f"{what}: {example}" for what, example in sorted(problems.items()))
