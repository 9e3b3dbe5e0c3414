"""`strived schema`: print the rule JSON Schema (the one that validates every rule)."""

from __future__ import annotations

import json
import sys

from ..errors import RuleError


def register(sub) -> None:
    p = sub.add_parser("schema", help="print the rule JSON Schema; with FILE, validate a rule file")
    p.add_argument("file", nargs="?", help="a rule JSON file to validate")
    p.set_defaults(func=cmd_schema)


def cmd_schema(args) -> int:
    from ..rules import parse_rule, rule_schema  # lazy: loads numpy

    if not args.file:
        json.dump(rule_schema(), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
        return 0
    try:
        with open(args.file, encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        print(f"strived: error: {args.file}: {e}", file=sys.stderr)
        return 1
    except RecursionError:
        print(f"strived: error: {args.file}: nested too deeply to be a rule", file=sys.stderr)
        return 1
    try:
        rule = parse_rule(doc)
    except RuleError as e:
        print(f"{args.file}: {e}", file=sys.stderr)
        return 1
    for ptr, msg in rule.warnings:
        print(f"{args.file}: warning: {ptr or '/'}: {msg}", file=sys.stderr)
    print(f"{args.file}: valid; canonical form:")
    json.dump(rule.to_dict(), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0
