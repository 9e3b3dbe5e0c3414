"""`strived` command line. Subcommands live in `strived/commands/` (auto-discovered)."""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sqlite3
import sys

from . import __version__, commands
from .commands.terminal import install
from .errors import StrivedError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="strived",
        description="STRIVE-D: search dashcam footage in plain language (offline).")
    p.add_argument("--version", action="version", version=f"strived {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    for m in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        if m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{commands.__name__}.{m.name}")
        if hasattr(mod, "register"):
            mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    import multiprocessing

    multiprocessing.freeze_support()   # a frozen bundle's indexing worker processes start here

    install()          # no control sequence from data reaches the terminal
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except StrivedError as e:
        print(f"strived: error: {e}", file=sys.stderr)
        return 1
    except sqlite3.OperationalError as e:  # e.g. I/O errors: not a damaged library
        print(f"strived: error: the library database could not be used: {e}", file=sys.stderr)
        return 1
    except sqlite3.DatabaseError as e:  # a damaged page met after the library was opened
        lib = getattr(args, "library", None) or "LIBRARY"
        print(f"strived: error: the library database cannot be read ({e}); it may be damaged: run "
              f"`strived check --library {lib}` for details and what to do", file=sys.stderr)
        return 1
    except RecursionError:
        print("strived: error: the input is nested too deeply to be read", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("strived: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
