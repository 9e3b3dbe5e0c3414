"""`strived caption`: captions from the configured vision-language model, for BM25."""

from __future__ import annotations

import sys

from ..retrieval.captioner import caption_videos
from ._common import TerminalProgress, add_library_arg
from .search import configured_llm


def register(sub) -> None:
    p = sub.add_parser("caption", help="caption videos with the configured vision-language LLM endpoint "
                                       "(STRIVED_LLM_*); the captions feed BM25")
    add_library_arg(p)
    p.add_argument("--frames", type=int, default=4, help="frames sent per video (default 4)")
    p.add_argument("--overwrite", action="store_true", help="re-caption videos captioned by a model before")
    p.set_defaults(func=cmd_caption)


def cmd_caption(args) -> int:
    from ..engine import build_text_index  # lazy: loads numpy
    from ..store import Library  # lazy: loads numpy

    llm = configured_llm()
    if llm is None:
        print("strived: error: no LLM endpoint configured: set STRIVED_LLM_BASE_URL and STRIVED_LLM_MODEL "
              "(a model that accepts images), or the config file (see docs/llm.md)", file=sys.stderr)
        return 1
    with Library.open(args.library) as lib:
        rep = caption_videos(lib, llm, frames=args.frames, overwrite=args.overwrite, progress=TerminalProgress())
        print(f"captioned {len(rep.captioned)} videos, skipped {len(rep.skipped)}, failed {len(rep.failed)}")
        for vid, err in rep.failed.items():
            print(f"  FAILED {vid}: {err}", file=sys.stderr)
        if rep.captioned:
            build_text_index(lib)
    return 1 if rep.failed and not rep.captioned else 0
