"""Node features and a job's constraint on them, as Slurm's `--constraint`: `bigmem&nvme` needs both,
`gpu-h100|gpu-a100` either; `&` binds tighter than `|`, so `a&b|c` is (a and b) or c."""

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

FEATURE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,49}$")
MAX_TERMS = 16  # alternatives and features in each: enough for any real request, small enough to check per node


class BadConstraint(ValueError):
    pass


@dataclass(frozen=True)
class Constraint:
    """What a job asks of its node's features: any one of `alternatives`, each a set of features all needed."""

    alternatives: tuple[frozenset[str], ...]

    ANY: ClassVar["Constraint"]

    def allows(self, features: frozenset[str] | set[str]) -> bool:
        return not self.alternatives or any(alternative <= features for alternative in self.alternatives)

    def missing(self, features: frozenset[str] | set[str]) -> list[str]:
        """The fewest features the node lacks for any alternative, in name order ([] when it has them)."""
        if self.allows(features):
            return []
        gaps: list[list[str]] = [sorted(a - features) for a in self.alternatives]
        return min(gaps, key=lambda gap: (len(gap), gap))

    def __str__(self) -> str:
        return "|".join("&".join(sorted(a)) for a in self.alternatives)


Constraint.ANY = Constraint(())


def parse(text: str) -> Constraint:
    """A constraint from its text ("" asks for nothing); raises BadConstraint saying what is wrong."""
    text = text.strip().lower()
    if not text:
        return Constraint.ANY
    alternatives = []
    for part in text.split("|"):
        names = [name.strip() for name in part.split("&")]
        for name in names:
            if not FEATURE.match(name):
                shown = name or "(nothing)"
                raise BadConstraint(
                    f"{shown!r} is not a feature: use letters, digits, '.', '_', '-', joined by '&' (all) or '|' (any)"
                )
        if len(names) > MAX_TERMS:
            raise BadConstraint(f"at most {MAX_TERMS} features in each alternative")
        alternatives.append(frozenset(names))
    if len(alternatives) > MAX_TERMS:
        raise BadConstraint(f"at most {MAX_TERMS} alternatives")
    return Constraint(tuple(dict.fromkeys(alternatives)))


def parse_features(text: str) -> list[str]:
    """A node's features from a comma-separated list (E31_NODE_FEATURES), sorted and without repeats."""
    names = {name.strip().lower() for name in text.split(",") if name.strip()}
    for name in names:
        if not FEATURE.match(name):
            raise BadConstraint(f"{name!r} is not a feature: use letters, digits, '.', '_' or '-'")
    return sorted(names)


def named(features: Sequence[str]) -> str:
    """E.g. "the feature bigmem", "the features bigmem and nvme" (which no node has together)."""
    if len(features) == 1:
        return f"the feature {features[0]}"
    return f"the features {', '.join(features[:-1])} and {features[-1]}"
