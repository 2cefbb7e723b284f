"""Schemathesis against the live /api/schema/: generated requests to every operation (as a member, with
a team, a job with outputs and a node to find) never get a 5xx, and every documented answer conforms
to the document (its schema, content type and headers)."""

import hypothesis
import pytest
import schemathesis
from schemathesis import checks
from schemathesis.runner import events

from teams.models import ApiToken
from teams.tokens import issue_token
from tests.factories import RuntimeImageFactory, submit_job

EXAMPLES_PER_OPERATION = 12
CHECKS = (
    checks.not_a_server_error,
    checks.response_schema_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
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
    schema = schemathesis.from_uri(f"{live_server.url}/api/schema/?format=json", base_url=live_server.url)
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
    problems, tested = [], set()
    for event in runner.execute():
        if isinstance(event, events.AfterExecution):
            tested.add(f"{event.method} {event.path}")
            for check in event.result.checks:
                if check.value.name != "success":
                    ctx = check.context
                    detail = f"{getattr(ctx, 'validation_message', '')} at {getattr(ctx, 'instance_path', '')}"
                    problems.append(f"{event.method} {event.path}: {check.name}: {check.message} {detail}")
            for error in event.result.errors:
                problems.append(f"{event.method} {event.path}: error: {error.exception}")
        elif isinstance(event, events.Finished):
            problems += [f"generic error: {e.exception}" for e in event.generic_errors]

    assert {"POST /api/v1/jobs/", "GET /api/v1/jobs/", "POST /api/v1/tokens/"} <= tested
    assert not problems, "\n".join(sorted(set(problems))[:40])
