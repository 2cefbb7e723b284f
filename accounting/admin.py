from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from accounting.budgets import month_of
from accounting.chain import ledger_row
from accounting.heads import last_head
from accounting.models import Budget, BudgetExtension, EffectiveDated, LedgerVerification, RateCard, Record, StoreQuota
from core.admin import ReadOnlyAdmin, acting_user


@admin.register(Record)
class RecordAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    # Six narrow columns, so the list fits a laptop screen; the rest of a record is on its page.
    list_display = ["sequence", "job_name", "team", "outcome", "held_seconds", "cost"]
    list_filter = ["outcome", "team", "node", "released_at"]
    search_fields = ["job__name", "=job__id", "node", "=hash"]
    list_select_related = ["job", "team"]

    @admin.display(description="job", ordering="job__name")
    def job_name(self, record: Record) -> str:
        return record.job.name

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> HttpResponse:
        database, witnessed = ledger_row(), last_head()
        head = witnessed.head
        differ = bool(database and head and head.sequence == database.sequence and head.hash != database.hash)
        context = {
            "ledger_database_head": database,
            "ledger_heads_file": witnessed,
            "ledger_heads_differ": differ,
            "ledger_records_removed": max(head.sequence - database.sequence, 0) if database and head else 0,
        }
        return super().changelist_view(request, {**context, **(extra_context or {})})


class EffectiveDatedForm(forms.ModelForm):
    past = ""  # the error for a row that would start in the past

    def clean_effective_from(self) -> datetime:
        value: datetime = self.cleaned_data["effective_from"]
        if value < timezone.now():
            raise forms.ValidationError(self.past)
        return value


class EffectiveDatedAdmin(admin.ModelAdmin):
    """A history of rows: add one to change a value from a moment on; a row in force stays as it was."""

    actions = None

    def has_change_permission(self, request: HttpRequest, obj: EffectiveDated | None = None) -> bool:
        return obj is None or obj.effective_from > timezone.now()

    def has_delete_permission(self, request: HttpRequest, obj: EffectiveDated | None = None) -> bool:
        return obj is not None and obj.effective_from > timezone.now()

    def save_model(self, request: HttpRequest, obj: RateCard | StoreQuota, form: Any, change: bool) -> None:
        if not change:
            obj.created_at = timezone.now()
            obj.created_by = acting_user(request)
        super().save_model(request, obj, form, change)


class RateCardForm(EffectiveDatedForm):
    past = "A new rate starts now or later: the past keeps the rates it had."

    class Meta:
        model = RateCard
        fields = ["effective_from", "runtime_image", "core_hour", "gb_hour", "gpu_hour", "note"]


@admin.register(RateCard)
class RateCardAdmin(EffectiveDatedAdmin):
    form = RateCardForm
    list_display = ["effective_from", "runtime_image", "core_hour", "gb_hour", "gpu_hour", "note", "created_by"]
    list_filter = ["runtime_image", "effective_from"]
    search_fields = ["runtime_image", "note"]


@admin.register(Budget)
class BudgetAdmin(admin.ModelAdmin):
    list_display = ["team", "unit", "monthly", "updated_at"]
    list_filter = ["unit"]
    search_fields = ["team__slug", "team__name"]
    autocomplete_fields = ["team"]


@admin.register(BudgetExtension)
class BudgetExtensionAdmin(admin.ModelAdmin):
    list_display = ["team", "month", "amount", "reason", "granted_by", "granted_at"]
    list_filter = ["team", "month"]
    search_fields = ["team__slug", "reason"]
    fields = ["team", "month", "amount", "reason"]
    autocomplete_fields = ["team"]
    actions = None

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        return {"month": month_of(timezone.now())}

    def has_change_permission(self, request: HttpRequest, obj: BudgetExtension | None = None) -> bool:
        return obj is None

    def has_delete_permission(self, request: HttpRequest, obj: BudgetExtension | None = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: BudgetExtension, form: Any, change: bool) -> None:
        obj.month = obj.month.replace(day=1)
        obj.granted_at = timezone.now()
        obj.granted_by = acting_user(request)
        super().save_model(request, obj, form, change)


class StoreQuotaForm(EffectiveDatedForm):
    past = "A new quota starts now or later: the past keeps the quota it had."

    class Meta:
        model = StoreQuota
        fields = ["team", "effective_from", "quota_bytes", "note"]


@admin.register(StoreQuota)
class StoreQuotaAdmin(EffectiveDatedAdmin):
    form = StoreQuotaForm
    list_display = ["team", "effective_from", "quota_bytes", "megabytes", "note", "created_by"]
    list_filter = ["effective_from"]
    search_fields = ["team__slug", "team__name", "note"]
    autocomplete_fields = ["team"]
    list_select_related = ["team", "created_by"]

    @admin.display(description="MB", ordering="quota_bytes")
    def megabytes(self, quota: StoreQuota) -> str:
        return f"{quota.quota_bytes / (1024 * 1024):.1f}"


@admin.register(LedgerVerification)
class LedgerVerificationAdmin(ReadOnlyAdmin, admin.ModelAdmin):
    list_display = ["ran_at", "ok", "since_sequence", "records", "head_sequence", "seconds", "problem"]
    list_filter = ["ok", "ran_at"]
    search_fields = ["problem"]
