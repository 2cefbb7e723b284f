"""pool.nodes.pool_nodes: every registered node, read now or as this process read them a moment ago."""

import pytest
from django.utils import timezone

from pool.nodes import Capacity, forget_pool_view, pool_nodes, register
from tests.factories import frozen_monotonic, registered_elsewhere

SMALL = Capacity(cpu_ids=[0, 1], memory_mb=1024, gpu_ids=[])


@pytest.fixture
def small(db):
    return register("small", SMALL, now=timezone.now())


def test_read_now_it_asks_the_database_each_time(small, django_assert_num_queries):
    with django_assert_num_queries(2):
        assert [n.name for n in pool_nodes()] == ["small"]
        assert [n.name for n in pool_nodes()] == ["small"]


def test_a_recent_view_answers_without_a_query(small, monkeypatch, django_assert_num_queries):
    frozen_monotonic(monkeypatch)
    pool_nodes()

    with django_assert_num_queries(0):
        assert [n.name for n in pool_nodes(max_age_s=5)] == ["small"]


def test_a_view_older_than_asked_is_read_again(small, monkeypatch, django_assert_num_queries):
    clock = frozen_monotonic(monkeypatch)
    pool_nodes()
    registered_elsewhere("late", SMALL, monkeypatch)

    clock[0] += 4
    assert [n.name for n in pool_nodes(max_age_s=5)] == ["small"]  # a node made behind this process's back
    clock[0] += 2
    with django_assert_num_queries(1):
        assert {n.name for n in pool_nodes(max_age_s=5)} == {"small", "late"}


def test_a_node_this_process_registers_is_seen_at_once(small, monkeypatch):
    frozen_monotonic(monkeypatch)
    pool_nodes()

    register("big", Capacity(cpu_ids=list(range(64)), memory_mb=65536, gpu_ids=[]), now=timezone.now())

    assert {n.name for n in pool_nodes(max_age_s=5)} == {"small", "big"}


def test_forgetting_the_view_reads_it_again(small, monkeypatch, django_assert_num_queries):
    frozen_monotonic(monkeypatch)
    pool_nodes()
    forget_pool_view()

    with django_assert_num_queries(1):
        pool_nodes(max_age_s=5)


def test_an_empty_view_is_read_again_however_recent(db, monkeypatch, django_assert_num_queries):
    frozen_monotonic(monkeypatch)
    assert pool_nodes() == []  # no node has registered yet

    with django_assert_num_queries(1):
        assert pool_nodes(max_age_s=5) == []
