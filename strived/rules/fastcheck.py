"""A fast yes to "does this document satisfy the rule JSON Schema?" for the documents that do.

Every new process parses the shipped rule library (~90 documents) on its first search; importing
jsonschema and validating them with it cost ~0.25 s of that search. `conforms` walks the schema
itself for the keywords the rule schema uses and says yes only where jsonschema finds no error:
each keyword is checked at least as strictly as jsonschema checks it (Draft 2020-12), and a
keyword or form it does not know makes it say no. On a no, `model.parse_rule` asks jsonschema,
whose errors are the messages a user sees; a document jsonschema accepts is then accepted as
before.
"""

from __future__ import annotations

import numbers
from typing import Any

#: keywords that do not constrain a document
_ANNOTATIONS = frozenset(("$schema", "$id", "title", "description", "default"))


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "number": _is_number,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _type(v, want, schema) -> bool:
    names = [want] if isinstance(want, str) else want
    return isinstance(names, list) and any(n in _TYPES and _TYPES[n](v) for n in names)


def _enum(v, want, schema) -> bool:
    # the same value of the same type (jsonschema tells 1 from True and 1.0 from 1 no more strictly)
    return isinstance(want, list) and any(e is v or (type(e) is type(v) and e == v) for e in want)


def _properties(v, want, schema) -> bool:
    if not isinstance(v, dict):
        return True
    return isinstance(want, dict) and all(conforms(v[k], sub) for k, sub in want.items() if k in v)


def _additional(v, want, schema) -> bool:
    if not isinstance(v, dict) or want is True:
        return True
    props = schema.get("properties", {})
    return want is False and all(k in props for k in v)


def _required(v, want, schema) -> bool:
    return not isinstance(v, dict) or (isinstance(want, list) and all(k in v for k in want))


def _items(v, want, schema) -> bool:
    if not isinstance(v, list):
        return True
    return isinstance(want, dict) and all(conforms(x, want) for x in v)


def _bound(kind: type, test):
    """A bound keyword: on a ``kind`` (float: any number) the test, elsewhere no constraint."""
    def check(v, want, schema) -> bool:
        if kind is float:
            if not isinstance(v, numbers.Number) or isinstance(v, bool):
                return True                 # the keyword does not apply to other types
            return _is_number(v) and _is_number(want) and test(v, want)   # (another number: ask)
        return not isinstance(v, kind) or (_is_number(want) and test(len(v), want))
    return check


_KEYWORDS = {
    "type": _type, "enum": _enum, "properties": _properties, "additionalProperties": _additional,
    "required": _required, "items": _items,
    "anyOf": lambda v, want, schema: isinstance(want, list) and any(conforms(v, s) for s in want),
    "minItems": _bound(list, lambda n, w: n >= w), "maxItems": _bound(list, lambda n, w: n <= w),
    "minLength": _bound(str, lambda n, w: n >= w), "maxLength": _bound(str, lambda n, w: n <= w),
    "minimum": _bound(float, lambda x, w: x >= w), "maximum": _bound(float, lambda x, w: x <= w),
    "exclusiveMinimum": _bound(float, lambda x, w: x > w),
}


def conforms(doc: Any, schema: dict) -> bool:
    """True only when jsonschema (Draft 2020-12) would find no error in ``doc`` against
    ``schema``; False when it would, or when this check cannot tell (ask jsonschema)."""
    if not isinstance(schema, dict):
        return False
    for key, want in schema.items():
        if key in _ANNOTATIONS:
            continue
        check = _KEYWORDS.get(key)
        if check is None or not check(doc, want, schema):
            return False
    return True
