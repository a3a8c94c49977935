"""A small, deterministic JSON Schema subset for delivery items (no dependency, no network refs).

Supported keywords: ``type`` (object, array, string, integer, number, boolean, null, or a list of them),
``properties``, ``required``, ``additionalProperties`` (boolean), ``items``, ``minItems``, ``maxItems``,
``enum``, ``const``, ``minimum``, ``maximum``, ``minLength``, ``maxLength``, ``pattern`` (Python ``re``,
searched). Any other keyword is rejected when the exam is loaded, so nothing is silently ignored.
Booleans are never integers or numbers.
"""

from __future__ import annotations

import re
from typing import Any

KEYWORDS = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
        "enum", "const", "minimum", "maximum", "minLength", "maxLength", "pattern", "description",
    }
)  # fmt: skip
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")


def check_schema(schema: object, path: str = "$") -> None:
    """Raise ValueError naming the place if ``schema`` uses anything outside the subset."""
    if not isinstance(schema, dict):
        raise ValueError(f"schema at {path} must be an object")
    unknown = set(schema) - KEYWORDS
    if unknown:
        raise ValueError(f"schema at {path} uses unsupported keywords {sorted(unknown)}")
    types = schema.get("type")
    for t in types if isinstance(types, list) else [types] if types is not None else []:
        if t not in TYPES:
            raise ValueError(f"schema at {path} has unknown type {t!r}")
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{path}.{name}")
    if "items" in schema:
        check_schema(schema["items"], f"{path}[]")
    if "pattern" in schema:
        re.compile(schema["pattern"])


def _is_type(value: Any, t: str) -> bool:
    if t == "object":
        return isinstance(value, dict)
    if t == "array":
        return isinstance(value, list)
    if t == "string":
        return isinstance(value, str)
    if t == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if t == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if t == "boolean":
        return isinstance(value, bool)
    return value is None


def _same(a: Any, b: Any) -> bool:
    return (type(a) is type(b) and a == b) or (_is_type(a, "number") and _is_type(b, "number") and a == b)


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> list[str]:
    """Every violation of ``schema`` by ``value``, in a fixed order (empty if valid)."""
    errors: list[str] = []
    types = schema.get("type")
    if types is not None:
        allowed = types if isinstance(types, list) else [types]
        if not any(_is_type(value, t) for t in allowed):
            return [f"{path}: expected {'/'.join(allowed)}"]
    if "const" in schema and not _same(value, schema["const"]):
        errors.append(f"{path}: must be {schema['const']!r}")
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        errors.append(f"{path}: must be one of {schema['enum']!r}")
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: below minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: above maximum {schema['maximum']}")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errors.append(f"{path}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(f"{path}: longer than {schema['maxLength']}")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errors.append(f"{path}: does not match {schema['pattern']!r}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{path}: more than {schema['maxItems']} items")
        if "items" in schema:
            for i, v in enumerate(value):
                errors.extend(validate(v, schema["items"], f"{path}[{i}]"))
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        for name in schema.get("required", []):
            if name not in value:
                errors.append(f"{path}: missing required {name!r}")
        for name in sorted(value):
            if name in props:
                errors.extend(validate(value[name], props[name], f"{path}.{name}"))
            elif schema.get("additionalProperties", True) is False:
                errors.append(f"{path}: unexpected property {name!r}")
    return errors
