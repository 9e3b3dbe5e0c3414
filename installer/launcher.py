"""Frozen entry point of the STRIVE-D bundle.

``strived [LIBRARY] [--self-test] [...]`` opens the desktop app (``app.__main__``);
``strived cli SUBCOMMAND ...`` runs the command-line tool (``strived.cli``) from the same bundle.
"""

import multiprocessing
import os
import sys


def main() -> int:
    multiprocessing.freeze_support()
    # a bundle never reaches a model hub: whatever ships is what runs
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if len(sys.argv) > 1 and sys.argv[1] == "cli":
        from strived.cli import main as cli_main

        return cli_main(sys.argv[2:])
    from app.__main__ import main as app_main

    return app_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
