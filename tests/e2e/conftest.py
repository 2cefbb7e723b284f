"""The browser context every Playwright test of the suite uses (tests/e2e/test_browser.py,
tests/e2e/test_dashboard.py…): fresh per test, keeping the Content-Security-Policy violations of its pages."""

import pytest
from playwright.sync_api import expect

# Assertions wait as long as the context's actions do: a page answering in 6 s on a loaded machine is slow, not
# wrong (Playwright's own default for `expect` is 5 s).
expect.set_options(timeout=15_000)

# Every Content-Security-Policy violation on any page of the context: the event, reported to the test.
REPORT_CSP_VIOLATIONS = """document.addEventListener('securitypolicyviolation', e =>
  window.__e31_csp_violation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} in ${e.documentURI}`));"""


@pytest.fixture
def context(browser):
    """A fresh browser context (cookies, storage, downloads) per test, which keeps the CSP violations
    of its pages (`context.csp_violations`): the policy's events and the console's reports. Any left at the
    end fails the test."""
    context = browser.new_context(accept_downloads=True, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    context.csp_violations = []
    context.expose_binding("__e31_csp_violation", lambda source, text: context.csp_violations.append(text))
    context.add_init_script(REPORT_CSP_VIOLATIONS)
    context.on(
        "console",
        lambda message: (
            context.csp_violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    yield context
    violations = context.csp_violations
    context.close()
    # Any test's pages, whether it looked or not: a violation is a bug of the page (but in the watch's own test).
    if not getattr(context, "csp_violations_caused", False):
        assert violations == [], f"Content-Security-Policy violations: {violations}"
