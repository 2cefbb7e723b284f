# E31 Network. Quick start: `make run` (a one-node pool on http://127.0.0.1:8000), `make test`.
SHELL := /bin/bash
PY := .venv/bin/python
VENV_STAMP := .venv/.installed
APT_PACKAGES := docker.io runsc chromium busybox-static debootstrap redis-server postgresql
PORT ?= 8000
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/e31
PYTEST_WORKERS ?= 2
# The platform's plane (docs/deploy.md): a worker for each kind of platform work (E31_PLATFORM_TASKS in
# e31site/settings.py) and its threads. tests/workers.py starts the same.
PLATFORM_WORKERS := scheduler:2 isolation:1 webhooks:2 mail:2 schedules:2 upkeep:1
# Celery's gossip, mingle and event heartbeats serve nothing here; off, an idle worker is quieter.
CELERY_QUIET := --without-gossip --without-mingle --without-heartbeat

.PHONY: run stop test install system-packages services images migrate demo lint check-deploy bench clean

## Install what the project needs: Debian packages when missing, then a virtualenv.
install: system-packages $(VENV_STAMP)

system-packages:
	@missing=""; \
	command -v dockerd >/dev/null || missing="$$missing docker.io"; \
	command -v runsc >/dev/null || missing="$$missing runsc"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || missing="$$missing busybox-static"; \
	command -v debootstrap >/dev/null || missing="$$missing debootstrap"; \
	command -v redis-server >/dev/null || missing="$$missing redis-server"; \
	command -v pg_ctlcluster >/dev/null || missing="$$missing postgresql"; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq >var-apt.log 2>&1 || true; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >>var-apt.log 2>&1 || { tail -20 var-apt.log; exit 1; }; \
	  rm -f var-apt.log; \
	fi

$(VENV_STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

services: install
	scripts/services.sh start

migrate: install
	$(PY) manage.py migrate --no-input -v0

## Build the runtime images (busybox, python) once; cached afterwards.
images: migrate
	$(PY) manage.py build_runtime_images

demo: migrate
	$(PY) manage.py create_team demo --name "Demo team"
	$(PY) manage.py add_member alice --team demo --password e31-demo-alice --email alice@localhost
	$(PY) manage.py add_member operator --team demo --password e31-demo-operator --operator
	$(PY) manage.py demo_queues

## Start the node's worker, the platform workers, beat and web in the background (logs in var/log/); `make stop`
## stops them. The workers and beat are supervised (scripts/supervise.sh): one that exits, crashed or not, is
## started again. The one node takes jobs while its first isolation probes run, unless E31_PROVE_BEFORE_JOBS=1.
run: services images demo
	$(PY) manage.py collectstatic --no-input -v0
	@install -d -m 0700 var/log var/run
	@$(MAKE) -s stop-app
	E31_PROVE_BEFORE_JOBS=$${E31_PROVE_BEFORE_JOBS:-0} setsid scripts/supervise.sh worker .venv/bin/celery -A e31site worker -l info $(CELERY_QUIET) </dev/null >/dev/null 2>&1 &
	@for w in $(PLATFORM_WORKERS); do kind=$${w%%:*} threads=$${w##*:}; \
	  echo "setsid scripts/supervise.sh platform-$$kind .venv/bin/celery -A e31site worker --platform $$kind -P threads -c $$threads -n platform-$$kind@%h -l info $(CELERY_QUIET) &"; \
	  setsid scripts/supervise.sh platform-$$kind .venv/bin/celery -A e31site worker --platform $$kind -P threads -c $$threads -n platform-$$kind@%h -l info $(CELERY_QUIET) </dev/null >/dev/null 2>&1 & \
	done
	setsid scripts/supervise.sh beat .venv/bin/celery -A e31site beat -l info -s var/run/beat-schedule </dev/null >/dev/null 2>&1 &
	setsid .venv/bin/gunicorn e31site.wsgi -c e31site/gunicorn_conf.py -b 127.0.0.1:$(PORT) -w 3 --pid var/run/web.pid --access-logfile var/log/web-access.log </dev/null >var/log/web.log 2>&1 &
	@for i in $$(seq 1 40); do curl -fs -o /dev/null http://127.0.0.1:$(PORT)/login/ && break; sleep 0.5; done
	@echo
	@echo "E31 Network is running on http://127.0.0.1:$(PORT)/  (logs: var/log/, stop: make stop)"
	@echo "  log in as alice / e31-demo-alice (team demo), or operator / e31-demo-operator (admin: /admin/)"
	@echo "  API token for alice: $$($(PY) manage.py create_token alice)"
	@echo "  the node runs its isolation probes now; $$([ "$${E31_PROVE_BEFORE_JOBS:-0}" = 0 ] && echo 'it takes jobs meanwhile (E31_PROVE_BEFORE_JOBS=1: only once they pass, as a pool node does)' || echo 'it takes jobs once they pass (a few minutes; see /isolation/)')"
	@echo "  mail: $${EMAIL_HOST:-off (set EMAIL_HOST and EMAIL_PORT before make run)}; webhooks may reach: $${E31_WEBHOOK_ALLOWED_HOSTS:-nothing (set E31_WEBHOOK_ALLOWED_HOSTS: 127.0.0.1 opens its ports 80 and 443 only, 127.0.0.1:9000 or 127.0.0.1:8000-8099 others)}"
	@echo "  running (each logs to var/log/<name>.log):"
	@printf '    %-19s %-7s %s\n' worker "$$(pgrep -o -P $$(cat var/run/worker.pid))" "node $${E31_NODE_NAME:-local}: its runs only (queue node.$${E31_NODE_NAME:-local}), $${E31_WORKER_CONCURRENCY:-one process per core it lends}"
	@for w in $(PLATFORM_WORKERS); do kind=$${w%%:*} threads=$${w##*:}; \
	  printf '    %-19s %-7s %s\n' platform-$$kind "$$(pgrep -o -P $$(cat var/run/platform-$$kind.pid))" "platform work of kind $$kind (queue platform.$$kind), threads: $$threads"; \
	done
	@printf '    %-19s %-7s %s\n' beat "$$(pgrep -o -P $$(cat var/run/beat.pid))" "the periodic passes, queued for the platform workers" web "$$(cat var/run/web.pid)" "gunicorn, 3 processes, port $(PORT)"

# The workers and beat run under scripts/supervise.sh (started again if they exit): their pid files name the
# supervisors, which stop their process when signalled. All are signalled at once, then waited for (30 s at most).
stop-app:
	@pids=""; for f in var/run/web.pid var/run/beat.pid var/run/platform-*.pid var/run/worker.pid; do \
	  [ -f $$f ] || continue; pid=$$(cat $$f); kill $$pid 2>/dev/null && pids="$$pids $$pid"; \
	done; \
	for pid in $$pids; do for i in $$(seq 1 60); do kill -0 $$pid 2>/dev/null || break; sleep 0.5; done; done; \
	rm -f var/run/web.pid var/run/beat.pid var/run/platform-*.pid var/run/worker.pid

## Stop what `make run` started (the app, and services it started).
stop: stop-app
	scripts/services.sh stop

## The whole suite on PostgreSQL, a real Celery worker, real containers and a real browser.
test: install
	@$(MAKE) -s lint
	@export E31_SERVICES_RECORD=var/run/started-by-test; status=0; \
	scripts/services.sh start && $(MAKE) -s images && \
	DATABASE_URL=$(TEST_DATABASE_URL) $(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS) || status=$$?; \
	scripts/services.sh stop; \
	exit $$status

## Every benchmark of bench/ at a quick size (a few minutes), printing each one's headline figures; their
## whole output in var/log/bench-*.log. BENCHES="throughput lifecycle" runs only those.
bench: install
	@export E31_SERVICES_RECORD=var/run/started-by-bench; status=0; \
	scripts/services.sh start && $(MAKE) -s images && \
	$(PY) bench/run.py $(BENCHES) || status=$$?; \
	scripts/services.sh stop; \
	exit $$status

## Style, the layers (import-linter) and the types (mypy with django-stubs); `make test` runs it first.
lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/lint-imports --no-cache
	.venv/bin/mypy

check-deploy: install
	DJANGO_DEBUG=0 DJANGO_SECURE=1 DJANGO_SECRET_KEY=$$(openssl rand -hex 40) DJANGO_ALLOWED_HOSTS=e31.example \
	  $(PY) manage.py check --deploy --fail-level WARNING

clean: stop
	rm -rf var .venv
