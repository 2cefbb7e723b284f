"""The failure excerpt's filters: `{{ job.failure_excerpt|last_line }}` where one line is room enough."""

from django import template

from jobs.lifecycle import excerpts

register = template.Library()
register.filter("last_line", excerpts.last_line)
