"""Every command line of the README's "Command line" section parses with the CLI as shipped: the
command exists and every flag and argument written there is accepted (placeholders replaced by
values of the right kind; bracketed optional parts tried with and without them)."""

from __future__ import annotations

import itertools
import re
import shlex
from pathlib import Path

import pytest

from strived.cli import build_parser

README = Path(__file__).resolve().parents[2] / "README.md"
PLACEHOLDERS = {"LIB": "/tmp/lib", "VIDEO_ID...": "v1", "NEW": "/tmp/new", "OLD_FOLDER": "/tmp/a",
                "NEW_FOLDER": "/tmp/b", "AUX": "/tmp/aux", "FOLDER": "/tmp/f", "KEY": "cut_in",
                "RULE.json": "rule.json", "ADDRESS": "local", "...": "x"}


def readme_command_lines() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = text.split("## Command line", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    out = []
    for line in block.splitlines():
        line = line.split("  #", 1)[0].strip()          # the comment after the command
        for part in line.split(" ; "):
            if part.startswith("strived "):
                out.append(part.strip())
    return out


def variants(cmd: str) -> list[list[str]]:
    """The argv lists a line stands for: each ``[a | b]`` group left out, or one alternative."""
    groups = re.findall(r"\[([^\]]+)\]", cmd)
    skeleton = re.sub(r"\[[^\]]+\]", "{}", cmd)
    choices = [[""] + [alt.strip() for alt in g.split("|")] for g in groups]
    out = []
    for combo in itertools.product(*choices):
        argv = shlex.split(skeleton.format(*combo))[1:]
        out.append([PLACEHOLDERS.get(a, a) for a in argv])
    return out


LINES = readme_command_lines()


def test_the_readme_lists_commands():
    assert len(LINES) >= 15
    assert {shlex.split(c)[1] for c in LINES} >= {"index", "search", "import", "export", "check", "eval",
                                                   "calibrate", "demo", "bench", "events", "schema"}


@pytest.mark.parametrize("line", LINES)
def test_readme_command_parses(line):
    parser = build_parser()
    for argv in variants(line):
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:
            pytest.fail(f"README line {line!r} as {argv} is refused by the CLI (exit {e.code})")
        assert getattr(args, "func", None) is not None, argv
