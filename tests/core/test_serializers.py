"""core.serializers.ModelSerializer: a model's fields are built once per class, and copied for each use."""

from rest_framework import serializers

from core.serializers import ModelSerializer
from teams.models import Team


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
