"""Pages whose count stops at COUNT_CAP, as an exact count scans every matching row; `since` reaches further."""

from functools import cached_property
from typing import Any

from django.core.paginator import InvalidPage, Page, Paginator
from django.db.models import QuerySet
from django.http import Http404
from rest_framework.pagination import PageNumberPagination

from core.bounds import BIGINT_MAX

COUNT_CAP = 10_000


class CappedPaginator(Paginator):
    @cached_property
    def count(self) -> int:
        rows = self.object_list
        if isinstance(rows, QuerySet):  # SELECT COUNT(*) FROM (SELECT id … LIMIT COUNT_CAP): no sort, no join
            return rows.order_by().select_related(None).values("pk")[:COUNT_CAP].count()
        return min(len(rows), COUNT_CAP)


class BoundedPageNumbers(PageNumberPagination):
    """Pages numbered from 1 to as many as `most_rows` rows fill, as the OpenAPI document says."""

    most_rows = BIGINT_MAX  # a list's rows have bigint ids at most

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        most = -(-self.most_rows // (self.page_size or 1))
        for parameter in parameters:
            if parameter["name"] == self.page_query_param:
                parameter["schema"] = {**parameter["schema"], "minimum": 1, "maximum": most}
        return parameters


class CappedCountPagination(BoundedPageNumbers):
    django_paginator_class = CappedPaginator
    most_rows = COUNT_CAP


def page_or_404(paginator: "Paginator[Any]", number: str | None) -> "Page[Any]":
    """The page asked for (default 1, or "last"), else 404."""
    try:
        return paginator.page(paginator.num_pages if number == "last" else number or 1)
    except InvalidPage:
        raise Http404("No such page.") from None
