"""One look at a screen: a screenshot at desktop and phone width, and an accessibility check (axe-core).

Shared by the browser tests of every screen: `check_screen(page, "review")` leaves
`var/artifacts/screens/review-desktop.png` and `review-phone.png` and fails on any `serious` or
`critical` axe-core violation. axe-core 4.10.3 is vendored for the tests only (tests/e2e/vendor/).
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AXE = ROOT / "tests" / "e2e" / "vendor" / "axe.min.js"
SCREENS = ROOT / "var" / "artifacts" / "screens"
WIDTHS = {"desktop": (1366, 900), "phone": (390, 844)}  # a common laptop, and a phone
RUN_AXE = """async () => {
  const result = await axe.run(document, {resultTypes: ['violations']});
  return result.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                      nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))}));
}"""


def check_screen(page, name: str) -> None:
    """Screenshot the page at both widths and assert axe-core finds nothing serious or critical."""
    SCREENS.mkdir(parents=True, exist_ok=True)
    before = page.viewport_size
    try:
        for label, (width, height) in WIDTHS.items():
            page.set_viewport_size({"width": width, "height": height})
            page.screenshot(path=str(SCREENS / f"{name}-{label}.png"), full_page=True)
    finally:
        if before:
            page.set_viewport_size(before)
    if not page.evaluate("() => typeof window.axe === 'object'"):
        # Through the CDP, not a <script> of the page's: the site's Content-Security-Policy stays untouched.
        page.evaluate(AXE.read_text())
    violations = [v for v in page.evaluate(RUN_AXE) if v["impact"] in ("serious", "critical")]
    assert not violations, f"{name}: accessibility violations: {violations}"
