"""Pages whose count stops at COUNT_CAP, as an exact count scans every matching row; `since` reaches further."""

from functools import cached_property
from typing import Any

from django.core.paginator import InvalidPage, Page, Paginator
from django.db.models import QuerySet
from django.http import Http404
from rest_framework.pagination import PageNumberPagination

COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if isinstance(rows, QuerySet):  # SELECT COUNT(*) FROM (SELECT id … LIMIT COUNT_CAP): no sort, no join
            return rows.order_by().select_related(None).values("pk")[:COUNT_CAP].count()
        return min(len(rows), COUNT_CAP)


class CappedCountPagination(PageNumberPagination):
    django_paginator_class = CappedPaginator


def page_or_404(paginator: "Paginator[Any]", number: str | None) -> "Page[Any]":
    """The page asked for (default 1, or "last"); no such page is 404."""
    try:
        return paginator.page(paginator.num_pages if number == "last" else number or 1)
    except InvalidPage:
        raise Http404("No such page.") from None
