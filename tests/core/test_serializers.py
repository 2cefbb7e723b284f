"""core.serializers.ModelSerializer: a model's fields are built once per class, and copied for each use."""

import copy
import datetime as dt

from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework import serializers

from core.outcomes import Outcome
from core.serializers import ModelSerializer
from jobs.models import Isolation, Job, Stage
from teams.models import Team
from teams.people import create_team


class TeamSerializer(ModelSerializer[Team]):
    shout = serializers.SerializerMethodField()

    class Meta:
        model = Team
        fields = ["slug", "name", "shout"]

    def get_shout(self, team: Team) -> str:
        return team.name.upper()


class NarrowTeamSerializer(TeamSerializer):
    class Meta(TeamSerializer.Meta):
        fields = ["slug"]


def test_the_fields_are_built_from_the_model_once_per_class(monkeypatch):
    builds = []
    build = serializers.ModelSerializer.build_field
    monkeypatch.setattr(serializers.ModelSerializer, "build_field", lambda *a: builds.append(a[1]) or build(*a))
    monkeypatch.delattr(TeamSerializer, "_built_fields", raising=False)

    first = TeamSerializer(Team(slug="red", name="Red")).data
    second = TeamSerializer(Team(slug="blue", name="Blue")).data

    assert builds == ["slug", "name"]  # the declared field is copied, never built
    assert first == {"slug": "red", "name": "Red", "shout": "RED"}
    assert second == {"slug": "blue", "name": "Blue", "shout": "BLUE"}


def test_each_instance_gets_fields_of_its_own():
    changed, untouched = TeamSerializer(), TeamSerializer()

    changed.fields["name"].label = "changed"
    changed.fields.pop("shout")

    assert untouched.fields["name"].label != "changed" and "shout" in untouched.fields
    assert changed.fields["slug"] is not untouched.fields["slug"]


def test_a_subclass_builds_its_own_fields_not_its_parents():
    assert list(TeamSerializer().fields) == ["slug", "name", "shout"]

    assert list(NarrowTeamSerializer(Team(slug="red", name="Red")).data) == ["slug"]
    assert list(TeamSerializer().fields) == ["slug", "name", "shout"]


class TeamWithPartsSerializer(ModelSerializer[Team]):
    tags = serializers.ListField(child=serializers.CharField(), source="name", read_only=True)
    members = TeamSerializer(source="*", read_only=True)

    class Meta:
        model = Team
        fields = ["slug", "tags", "members"]


def test_fields_with_parts_of_their_own_are_deep_copies():
    first, second = TeamWithPartsSerializer(), TeamWithPartsSerializer()

    assert first.fields["tags"].child is not second.fields["tags"].child
    assert first.fields["tags"].child.parent is first.fields["tags"]
    assert first.fields["members"] is not second.fields["members"]
    assert first.fields["members"].parent is first and second.fields["members"].parent is second


def test_a_copied_field_answers_with_its_own_serializers_context():
    class Contextual(ModelSerializer[Team]):
        who = serializers.SerializerMethodField()

        class Meta:
            model = Team
            fields = ["slug", "who"]

        def get_who(self, team: Team) -> str:
            return self.context["who"]

    red = Team(slug="red", name="Red")

    assert Contextual(red, context={"who": "alice"}).data["who"] == "alice"
    assert Contextual(red, context={"who": "bob"}).data["who"] == "bob"


def test_what_one_instance_adds_to_its_fields_no_other_sees():
    changed, later = TeamSerializer(), None

    changed.fields["name"].validators.append(lambda value: None)
    changed.fields["name"].error_messages["blank"] = "changed"
    later = TeamSerializer()

    assert len(later.fields["name"].validators) == len(changed.fields["name"].validators) - 1
    assert later.fields["name"].error_messages["blank"] != "changed"
    assert TeamSerializer._built_fields["name"].error_messages["blank"] != "changed"


def test_a_shallow_copy_is_the_field_as_built_and_can_itself_be_copied_again():
    built, copied = TeamSerializer._built_fields["name"], TeamSerializer().fields["name"]

    assert type(copied) is type(built) and copied is not built
    assert (copied.max_length, copied._kwargs) == (built.max_length, built._kwargs)
    assert copy.deepcopy(copied).max_length == built.max_length  # DRF rebuilds a field from its arguments


def test_a_field_whose_default_is_a_container_is_a_deep_copy():
    class WithDefault(ModelSerializer[Team]):
        tags = serializers.JSONField(default=list)
        labels = serializers.JSONField(default={"a": 1})

        class Meta:
            model = Team
            fields = ["slug", "tags", "labels"]

    first, second = WithDefault(), WithDefault()

    assert first.fields["labels"].default is not second.fields["labels"].default
    first.fields["labels"].default["b"] = 2
    assert second.fields["labels"].default == {"a": 1}


def test_the_model_s_validators_run_for_each_instance(db):
    create_team("taken")

    assert not TeamSerializer(data={"slug": "taken", "name": "x"}).is_valid()  # built once, runs each time
    assert TeamSerializer(data={"slug": "free", "name": "y"}).is_valid()
    assert not TeamSerializer(data={"slug": "taken", "name": "z"}).is_valid()


# --- showing an instance: the model's own columns read straight off it, as DRF would show them ---------------


class EveryColumn(ModelSerializer[Job]):
    """Every column of a job: UUID, text, numbers, a boolean, choices, JSON, datetimes and relations."""

    class Meta:
        model = Job
        fields = "__all__"


class Formatted(ModelSerializer[Job]):
    """Fields whose options the fast conversions do not take: they go DRF's way."""

    id = serializers.UUIDField(format="hex")
    env = serializers.JSONField(binary=True)
    submitted_at = serializers.DateTimeField(format="%d/%m/%Y %H:%M")
    held_at = serializers.DateTimeField(default_timezone=dt.UTC)

    class Meta:
        model = Job
        fields = ["id", "env", "submitted_at", "held_at", "name"]


def outcome(show):
    """What showing gives: each value with its type (True == 1 in Python), or the error it raised."""
    try:
        return {name: (type(value), value) for name, value in show().items()}
    except Exception as exc:  # noqa: BLE001 (both ways must fail alike)
        return (type(exc), str(exc))


def drf_shows(serializer, instance):
    return serializers.Serializer.to_representation(serializer, instance)


moments = st.datetimes(
    min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.none() | st.timezones()
)
jobs = st.fixed_dictionaries(
    {
        "id": st.uuids(),
        "name": st.text(max_size=8),
        "stage": st.sampled_from([*Stage, *Stage.values, "", "other"]),
        "outcome": st.sampled_from([*Outcome, *Outcome.values, ""]),
        "isolation": st.sampled_from(Isolation.values),
        "exit_code": st.none() | st.integers(-(2**31), 2**31 - 1),
        "cpus": st.integers(1, 256),
        "cancel_requested": st.sampled_from([True, False, 0, 1, "true", "no", None]),
        "command": st.lists(st.text(max_size=4), max_size=3),
        "env": st.dictionaries(st.text(max_size=3), st.text(max_size=3), max_size=2),
        "reason": st.text(max_size=8),
        "submitted_at": moments,
        "held_at": st.none() | moments,
        "released_at": st.none() | moments,
    }
)


REUSED: dict[type, ModelSerializer] = {}  # one of each kind for every example, in whichever zone: as a list's rows


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=jobs, zone=st.sampled_from(["UTC", "Europe/Paris", "Asia/Kolkata", "America/St_Johns"]))
def test_a_job_is_shown_as_drf_shows_it_in_any_time_zone(values, zone):
    job = Job(**values)
    with timezone.override(zone):
        for kind in (EveryColumn, Formatted):
            fast, drf, reused = kind(job), kind(job), REUSED.setdefault(kind, kind())
            expected = outcome(lambda: drf_shows(drf, job))  # noqa: B023 (called at once)
            assert outcome(lambda: fast.data) == expected  # noqa: B023
            assert outcome(lambda: reused.to_representation(job)) == expected  # noqa: B023


def test_a_mapping_is_shown_drf_s_way():
    assert NarrowTeamSerializer({"slug": "red", "name": "Red"}).data == {"slug": "red"}


def test_the_plan_of_showing_is_made_once_per_class_and_time_zone(monkeypatch):
    import core.serializers

    made = []
    plan = core.serializers._plan
    monkeypatch.setattr(core.serializers, "_plan", lambda *a, **k: made.append(a[0]) or plan(*a, **k))
    monkeypatch.delattr(EveryColumn, "_plans", raising=False)
    job = Job(name="nightly", submitted_at=timezone.now())

    shown = [EveryColumn(job).data for _ in range(3)]
    with timezone.override("Asia/Kolkata"):
        elsewhere = [EveryColumn(job).data for _ in range(3)]

    assert len(made) == 2  # one plan for each zone, whatever the number of serializers
    assert shown[0] == shown[2] and elsewhere[0] == elsewhere[2]
    assert shown[0]["submitted_at"] != elsewhere[0]["submitted_at"]


def test_an_instance_whose_fields_were_changed_shows_them_as_changed():
    team = Team(slug="red", name="Red")
    narrowed = TeamSerializer(team)
    narrowed.fields.pop("shout")
    narrowed.fields["name"] = serializers.SerializerMethodField(method_name="get_shout")

    assert narrowed.data == {"slug": "red", "name": "RED"}
    assert TeamSerializer(team).data == {"slug": "red", "name": "Red", "shout": "RED"}  # the class's plan is unchanged


def test_fields_shown_drf_s_way_are_bound_to_their_own_serializer():
    first, second = TeamWithPartsSerializer(Team(slug="a", name="A")), TeamWithPartsSerializer(Team(slug="b", name="B"))

    assert first.data["members"]["shout"] == "A" and second.data["members"]["shout"] == "B"
    assert first._field("members") is not second._field("members")
    assert first._field("members").parent is first


class WithoutTheName(TeamSerializer):
    """A class that decides its fields itself: what it leaves out is never shown."""

    def get_fields(self):
        fields = super().get_fields()
        fields.pop("name")
        fields["motto"] = serializers.SerializerMethodField()
        return fields

    def get_motto(self, team: Team) -> str:
        return f"go {team.slug}"


def test_a_class_that_decides_its_own_fields_is_shown_with_them():
    assert WithoutTheName(Team(slug="red", name="Secret")).data == {"slug": "red", "shout": "SECRET", "motto": "go red"}
