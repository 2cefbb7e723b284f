"""What the OpenAPI document says an operation answers, and the fields of a real answer it does not name."""

from django.test import Client


def answer_schema(path: str, status: str = "200") -> tuple[dict, dict]:
    """The whole document, and the schema of GET `path`'s JSON answer with `status`."""
    document = Client().get("/api/schema/?format=json").json()
    answer = document["paths"][path]["get"]["responses"][status]["content"]["application/json"]["schema"]
    return document, answer


def undeclared(document: dict, node: dict, value: object, at: str = "") -> list[str]:
    """Where `value` has a field that `node` does not name ([] when it names them all); a `oneOf` takes
    the option that fits best, an object without properties (an untyped `dict`) names no field."""
    if "$ref" in node:
        node = document["components"]["schemas"][node["$ref"].rsplit("/", 1)[1]]
    if "oneOf" in node:
        return min((undeclared(document, option, value, at) for option in node["oneOf"]), key=len)
    if isinstance(value, list):
        return [f for i, item in enumerate(value) for f in undeclared(document, node["items"], item, f"{at}[{i}]")]
    if not isinstance(value, dict):
        return []
    named, mapped = node.get("properties", {}), node.get("additionalProperties")
    found = []
    for key, item in value.items():
        if key in named:
            found += undeclared(document, named[key], item, f"{at}.{key}")
        elif mapped:  # a map: its keys are data (a DictField), its values are declared
            found += undeclared(document, mapped, item, f"{at}[{key}]")
        else:
            found.append(f"{at}.{key}")
    return found
