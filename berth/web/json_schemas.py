"""JSON Schema checks of request bodies, shared by the service's API and the conductors': a body is
checked by the schema compiled to Python (fastjsonschema), and only one it refuses goes on to
jsonschema, which stays the judge and writes the error the caller reads.

jsonschema walks the schema for every body, which made it a tenth of the cost of a provider or
allocation write; a compiled check says yes in a few microseconds. Validators are kept per schema
object (schemas are module-level constants), compiled ones also by the schema's text: many
microversions share a schema's content, if not the object, and a compilation costs milliseconds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias

import fastjsonschema
import jsonschema
import orjson
from jsonschema.exceptions import ValidationError, best_match

# A JSON schema (Draft 4), itself a JSON document.
JsonSchema: TypeAlias = Mapping[str, Any]
# fastjsonschema's compiled check: returns the data, or raises JsonSchemaException.
FastValidator: TypeAlias = Callable[[object], object]

_DRAFT4 = "http://json-schema.org/draft-04/schema#"


def is_uuid_or_other_type(value: object) -> bool:
    """The ``uuid`` format: a string must be a UUID; any other type is the schema's ``type``'s to judge."""
    if not isinstance(value, str):
        return True
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


FORMAT_CHECKER = jsonschema.FormatChecker()
FORMAT_CHECKER.checks("uuid")(is_uuid_or_other_type)

_validators: dict[int, jsonschema.Draft4Validator] = {}
_fast_validators: dict[int, FastValidator | None] = {}
_fast_validators_by_text: dict[bytes, FastValidator | None] = {}


def fast_validator(schema: JsonSchema) -> FastValidator | None:
    """The schema compiled to Python by fastjsonschema, or None if it cannot be."""
    key = id(schema)
    if key not in _fast_validators:
        text = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        if text not in _fast_validators_by_text:
            try:
                _fast_validators_by_text[text] = fastjsonschema.compile(
                    {"$schema": _DRAFT4, **schema}, formats={"uuid": is_uuid_or_other_type}
                )
            except fastjsonschema.JsonSchemaDefinitionException:
                _fast_validators_by_text[text] = None
        _fast_validators[key] = _fast_validators_by_text[text]
    return _fast_validators[key]


def compile_validators(schemas: Iterable[JsonSchema]) -> None:
    """Compile the validators of ``schemas`` now rather than on first use.  A server does it before
    it forks its workers, which then share them instead of each paying for them (3 to 10 ms a
    schema) during its first requests."""
    for schema in schemas:
        fast_validator(schema)


def first_error(data: object, schema: JsonSchema) -> ValidationError | None:
    """None when ``data`` fits ``schema``; else the error jsonschema ranks most relevant (as
    ``jsonschema.validate`` picks it)."""
    fast = fast_validator(schema)
    if fast is not None:
        try:
            fast(data)
            return None
        except fastjsonschema.JsonSchemaException:
            pass
    validator = _validators.get(id(schema))
    if validator is None:
        validator = _validators[id(schema)] = jsonschema.Draft4Validator(schema, format_checker=FORMAT_CHECKER)
    return best_match(validator.iter_errors(data))
