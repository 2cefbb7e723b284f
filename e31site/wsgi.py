import os

from django.core.wsgi import get_wsgi_application

from e31site.request_body import guard_body

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "e31site.settings")
application = guard_body(get_wsgi_application())
