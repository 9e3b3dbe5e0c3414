"""The one tokenizer used by BM25 indexing and querying (and by the offline router's lexicon).

Lowercase, split on anything that is not a letter or digit (so ``cut-in`` → ``cut``, ``in`` and
``dashcam_2021-06-03`` → ``dashcam``, ``2021``, ``06``, ``03``), split camelCase file-name parts,
drop English stop words and 1-character tokens. No stemming: summaries are generated with the same
word forms the lexicon uses, and stemming hurt nothing we could measure but made tokens unreadable.
"""

from __future__ import annotations

import re

_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_SPLIT = re.compile(r"[^0-9a-z]+")

STOP_WORDS = frozenset("""
a an and are as at be been being but by can did do does doing for from had has have having he her
here hers him his how i if in into is it its itself just me more most my no nor not of off on once
only or other our ours out over own same she should so some such than that the their theirs them
then there these they this those through to too under until up very was we were what when where
which while who whom why will with you your yours video clip footage dashcam shows showing
""".split())


def tokenize(text: str, stop_words: frozenset[str] = STOP_WORDS) -> list[str]:
    """Tokens of ``text`` for BM25 (order kept, duplicates kept)."""
    text = _CAMEL.sub(" ", text or "").lower()
    return [t for t in _SPLIT.split(text) if len(t) > 1 and t not in stop_words]
