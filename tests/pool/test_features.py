"""Node features and a job's constraint on them (pool.features), as Slurm's --constraint: `&` all, `|` any,
`&` binding tighter; and the check at submit (pool.nodes.check_constraint) against the registered nodes."""

import pytest
from django.utils import timezone

from pool.features import BadConstraint, Constraint, parse, parse_features
from pool.models import Node
from pool.nodes import Capacity, check_constraint, register

BIGMEM_NVME = frozenset({"bigmem", "nvme"})


# --- parse ------------------------------------------------------------------------------------------


def test_an_empty_constraint_asks_for_nothing_and_any_node_allows_it():
    for text in ("", "  "):
        assert parse(text) == Constraint.ANY
        assert parse(text).allows(frozenset())


def test_and_needs_every_feature():
    constraint = parse("bigmem&nvme")

    assert constraint.allows(BIGMEM_NVME | {"gpu-h100"})
    assert not constraint.allows(frozenset({"bigmem"}))


def test_or_needs_any_one():
    constraint = parse("gpu-h100|gpu-a100")

    assert constraint.allows(frozenset({"gpu-a100"}))
    assert constraint.allows(frozenset({"gpu-h100"}))
    assert not constraint.allows(frozenset({"bigmem"}))


def test_and_binds_tighter_than_or():
    constraint = parse("a&b|c")

    assert constraint == Constraint((frozenset({"a", "b"}), frozenset({"c"})))
    assert constraint.allows(frozenset({"c"}))
    assert constraint.allows(frozenset({"a", "b"}))
    assert not constraint.allows(frozenset({"a"}))
    assert not constraint.allows(frozenset({"b"}))


def test_a_constraint_is_read_without_case_and_spaces_and_says_itself_back():
    assert parse(" BigMem & nvme | GPU-H100 ") == parse("bigmem&nvme|gpu-h100")
    assert str(parse("nvme&bigmem|gpu-h100")) == "bigmem&nvme|gpu-h100"


def test_a_repeated_alternative_counts_once():
    assert parse("a&b|b&a") == Constraint((frozenset({"a", "b"}),))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("bigmem&", "'(nothing)'"),
        ("|nvme", "'(nothing)'"),
        ("a||b", "'(nothing)'"),
        ("(a|b)&c", "'(a'"),
        ("big mem", "'big mem'"),
        ("gpu!", "'gpu!'"),
        ("-gpu", "'-gpu'"),
    ],
)
def test_a_malformed_constraint_is_refused_naming_what_is_not_a_feature(text, named):
    with pytest.raises(BadConstraint, match="is not a feature") as refused:
        parse(text)

    assert str(refused.value).startswith(f"{named} is not a feature")


def test_a_constraint_is_refused_past_its_bounds():
    with pytest.raises(BadConstraint, match="at most 16 features"):
        parse("&".join(f"f{i}" for i in range(17)))
    with pytest.raises(BadConstraint, match="at most 16 alternatives"):
        parse("|".join(f"f{i}" for i in range(17)))


# --- missing ----------------------------------------------------------------------------------------


def test_missing_names_the_fewest_features_the_node_lacks():
    constraint = parse("bigmem&nvme&fast|gpu-h100")

    assert constraint.missing(frozenset({"bigmem"})) == ["gpu-h100"]
    assert constraint.missing(frozenset({"bigmem", "nvme"})) == ["fast"]
    assert constraint.missing(BIGMEM_NVME | {"fast"}) == []


def test_missing_names_features_in_name_order():
    assert parse("nvme&bigmem").missing(frozenset()) == ["bigmem", "nvme"]


# --- a node's features (E31_NODE_FEATURES) ----------------------------------------------------------


def test_a_nodes_features_are_read_sorted_lowercase_and_once():
    assert parse_features(" nvme, BigMem,,nvme ") == ["bigmem", "nvme"]
    assert parse_features("") == []


def test_a_node_feature_that_a_constraint_could_not_name_is_refused():
    with pytest.raises(BadConstraint, match="'big&mem' is not a feature"):
        parse_features("big&mem,nvme")


# --- check_constraint: at submit, against the registered nodes --------------------------------------


def registered(name: str, features: list[str]) -> None:
    register(name, Capacity(cpu_ids=[0], memory_mb=1024, gpu_ids=[]), now=timezone.now(), features=features)


@pytest.mark.django_db
def test_a_constraint_some_node_allows_is_accepted():
    registered("n1", ["bigmem", "nvme"])
    registered("n2", ["gpu-a100"])

    assert check_constraint("bigmem&nvme") == parse("bigmem&nvme")
    assert check_constraint("gpu-h100|gpu-a100") == parse("gpu-h100|gpu-a100")


@pytest.mark.django_db
def test_a_constraint_no_node_has_is_refused_naming_the_feature():
    registered("n1", ["bigmem"])

    with pytest.raises(BadConstraint, match="^no node of the pool has the feature gpu-h100$"):
        check_constraint("gpu-h100")
    with pytest.raises(BadConstraint, match="^no node of the pool has the feature nvme$"):
        check_constraint("bigmem&nvme")


@pytest.mark.django_db
def test_features_each_on_some_node_but_never_together_are_named_together():
    """Not "no node has the feature bigmem": n1 has it. What no node has is bigmem and nvme at once."""
    registered("n1", ["bigmem"])
    registered("n2", ["nvme"])

    with pytest.raises(BadConstraint, match="^no node of the pool has the features bigmem and nvme$"):
        check_constraint("bigmem&nvme")


@pytest.mark.django_db
def test_of_an_alternative_only_the_features_no_node_has_are_named():
    registered("n1", ["bigmem"])
    registered("n2", ["nvme"])

    with pytest.raises(BadConstraint, match="^no node of the pool has the feature fast$"):
        check_constraint("bigmem&nvme&fast")
    with pytest.raises(BadConstraint, match="^no node of the pool has the features gpu-a100 and gpu-h100$"):
        check_constraint("bigmem&nvme&gpu-h100&gpu-a100")


@pytest.mark.django_db
def test_a_constraint_is_judged_against_draining_and_offline_nodes_too():
    """They come back: a job asking for the features of a node under maintenance waits, it is not refused."""
    registered("n1", ["bigmem"])
    Node.objects.filter(name="n1").update(state=Node.State.OFFLINE)

    assert check_constraint("bigmem") == parse("bigmem")


@pytest.mark.django_db
def test_an_empty_pool_refuses_no_constraint_yet():
    assert check_constraint("gpu-h100") == parse("gpu-h100")


@pytest.mark.django_db
def test_a_malformed_constraint_is_refused_at_submit():
    registered("n1", ["bigmem"])

    with pytest.raises(BadConstraint, match="is not a feature"):
        check_constraint("bigmem&&nvme")
