"""The exit codes are a contract: one per outcome, one per kind of error, all distinct, as docs/cli.md lists."""

from pathlib import Path

from core.outcomes import Outcome
from e31cli.exits import OUTCOME_EXITS, Exit

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_every_outcome_has_its_own_exit_code():
    assert set(OUTCOME_EXITS) == set(Outcome.values)
    assert len(set(OUTCOME_EXITS.values())) == len(OUTCOME_EXITS)
    assert OUTCOME_EXITS["succeeded"] == 0 and Exit.USAGE == 2


def test_the_codes_are_distinct_and_documented():
    assert len({int(code) for code in Exit}) == len(Exit)
    table = DOCS.read_text()
    for code in Exit:
        assert f"| {int(code)} | `{code.name.lower()}` |" in table, code
