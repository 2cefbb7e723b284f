"""The docs cannot go stale: docs/api.md names every path, parameter and field of the OpenAPI
document, and docs/reference/modules.md lists every module that exists and no other."""

import ast
import re
import tomllib
from pathlib import Path

from django.test import Client

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
# Every package import-linter knows, so a new app is checked without being named here.
PACKAGES = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]
MODULE_PATH = re.compile(r"(?<![\w/.])(?:" + "|".join(PACKAGES) + r")/[\w/]*\w\.py\b")


def current_docs() -> list[Path]:
    """The documents that say how the code is now: the map and the topic references (not the diaries)."""
    return [DOCS / "architecture.md", *sorted(DOCS.glob("reference/*.md"))]


def quoted_words(text: str) -> set[str]:
    """The identifiers written as code in a Markdown text: in fenced blocks and between backticks."""
    blocks = re.findall(r"^```.*?^```", text, re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    code = blocks + re.findall(r"`([^`]+)`", prose)
    return {word for span in code for word in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", span)}


def schema_names(schema: dict, node: object, seen: set[str]) -> set[str]:
    """Every property name reachable from a part of the schema (through $refs, items, oneOf …)."""
    names: set[str] = set()
    if isinstance(node, list):
        for item in node:
            names |= schema_names(schema, item, seen)
    elif isinstance(node, dict):
        if (ref := node.get("$ref")) and ref not in seen:
            seen.add(ref)
            names |= schema_names(schema, schema["components"]["schemas"][ref.rsplit("/", 1)[1]], seen)
        names |= set(node.get("properties", {}))
        for key, value in node.items():
            if key not in ("$ref", "description", "enum", "example"):
                names |= schema_names(schema, value, seen)
    return names


def anchor(heading: str) -> str:
    """A Markdown heading's link target, as GitHub makes it: "A job's history" → "a-jobs-history"."""
    return re.sub(r"[^\w -]", "", heading.strip().lower()).replace(" ", "-")


def said_of(where: str, text: str, seen: frozenset[str] = frozenset()) -> str:
    """What api.md says of one operation: the table rows that name it in their first cell, the "##"
    sections that name it or that those rows link to, and what it says of the operations the rows
    refer to (`GET /api/v1/jobs/{id}/` for "→ 201 with the job, as `GET /api/v1/jobs/{id}/`")."""
    named = re.compile(re.escape(where) + r"(?![\w{}/.-])")
    cells = [re.split(r"(?<!\\)\|", line) for line in text.splitlines() if line.startswith("| ")]
    rows = ["|".join(cell) for cell in cells if named.search(cell[1])]
    links = {target for row in rows for target in re.findall(r"\]\(#([\w-]+)\)", row)}
    sections = re.split(r"^(?=## )", text, flags=re.MULTILINE)[1:]
    chosen = [s for s in sections if named.search(s) or anchor(s.splitlines()[0][3:]) in links]
    referred = {f"{m} {p}" for row in rows for m, p in re.findall(r"`([A-Z]+) (/[^`?\s]*)`", row.split("|", 2)[2])}
    chosen += [said_of(other, text, seen | {where}) for other in sorted(referred - seen - {where})]
    return "\n".join(rows + chosen) if rows else ""


def test_api_md_names_every_operation_parameter_and_field_where_it_documents_the_operation(db):
    schema = Client().get("/api/schema/?format=json").json()
    text = (ROOT / "docs" / "api.md").read_text()

    missing: dict[str, list[str]] = {}  # what is missing → the operations it is part of
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            where = f"{method.upper()} {path}"
            if not (said := said_of(where, text)):
                missing.setdefault("a table row", []).append(where)
            words = quoted_words(said)
            for parameter in operation.get("parameters", []):
                if parameter["in"] != "path" and parameter["name"] not in words:
                    missing.setdefault(f"parameter `{parameter['name']}`", []).append(where)
            bodies = [operation.get("requestBody", {})]
            bodies += [answer for status, answer in operation["responses"].items() if status.startswith("2")]
            for name in schema_names(schema, bodies, set()) - words:
                missing.setdefault(f"field `{name}`", []).append(where)

    lines = [f"{what} (of {', '.join(wheres)})" for what, wheres in sorted(missing.items())]
    assert not missing, "docs/api.md does not name, as code, in the row or section of the operation:\n" + "\n".join(
        lines
    )


def existing_modules() -> set[str]:
    """Every module of the site and the command line: migrations aside, an __init__.py only with code."""
    found = set()
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts or (path.name == "__init__.py" and not path.read_text().strip()):
                continue
            found.add(path.relative_to(ROOT).as_posix())
    return found


def test_modules_md_lists_every_module_and_no_other():
    text = (ROOT / "docs" / "reference" / "modules.md").read_text()
    listed = set(re.findall(r"^- `([\w/]+\.py)`:", text, re.MULTILINE))
    named = {path for doc in current_docs() for path in MODULE_PATH.findall(doc.read_text())}
    modules = existing_modules()

    unlisted = sorted(modules - listed)
    gone = sorted((listed | named) - modules)
    assert not unlisted, "docs/reference/modules.md does not list:\n" + "\n".join(unlisted)
    assert not gone, "the docs name modules that do not exist:\n" + "\n".join(gone)


MAP = DOCS / "architecture.md"
MAP_TABLES = ("One job, SUBMIT → RELEASE", "Rule → module")
IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?")


def sections(text: str) -> dict[str, str]:
    """A Markdown text's "##" sections by their title."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def defined_names(path: Path) -> set[str]:
    """What a module defines at its top: functions, classes (and `Class.method`), assigned names."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            methods = [item for item in node.body if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)]
            names |= {f"{node.name}.{method.name}" for method in methods}
        elif isinstance(node, ast.Assign):
            names |= {target.id for target in node.targets if isinstance(target, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_the_map_is_under_250_lines():
    lines = len(MAP.read_text().splitlines())
    assert lines <= 250, f"docs/architecture.md is {lines} lines: move the mechanism to docs/reference/"


def test_the_map_names_every_app():
    text = MAP.read_text()
    missing = [package for package in PACKAGES if f"`{package}/`" not in text]
    assert not missing, "docs/architecture.md does not name the apps: " + ", ".join(missing)


def table_rows(text: str) -> list[str]:
    """The body rows of a Markdown text's tables (the header and the separator left out)."""
    rows, in_body = [], False
    for line in text.splitlines():
        if line.startswith("|-"):
            in_body = True
        elif line.startswith("|") and in_body:
            rows.append(line)
        else:
            in_body = False
    return rows


def test_the_maps_tables_name_only_modules_and_functions_that_exist():
    """In each row of the job's steps and of the rule → module table, every name written as code after
    a module's path is defined in that module, and a row names at least one module: a renamed function
    or a moved module fails here until the map follows it."""
    by_title = sections(MAP.read_text())
    wrong, rows = [], 0
    for title in MAP_TABLES:
        assert title in by_title, f"docs/architecture.md has no section '## {title}'"
        for row in table_rows(by_title[title]):
            rows += 1
            module: Path | None = None
            named = False
            for code in re.findall(r"`([^`]+)`", row):
                if MODULE_PATH.fullmatch(code):
                    named, module = True, ROOT / code
                    if not module.is_file():
                        wrong.append(f"{code}: no such module")
                        module = None
                elif module is not None and IDENTIFIER.fullmatch(code) and code not in defined_names(module):
                    wrong.append(f"{code}: not defined in {code_path(module)}")
            if not named:
                wrong.append(f"a row names no module: {row}")
    assert rows > 40, "the map's tables have lost their rows"
    assert not wrong, "docs/architecture.md's tables:\n" + "\n".join(wrong)


def code_path(module: Path) -> str:
    return module.relative_to(ROOT).as_posix()
