"""The query, parsed once: `parse_query(text) -> ParsedQuery` (`parse`), over the one query
vocabulary (`vocabulary`). The matcher, composition, adapter (`strived.rulelib`) and the fusion
router (`strived.retrieval.router`) read this value; none reads the raw text with word lists of
its own."""

from .parse import (Evidence, Motion, ParsedQuery, Qualifiers, Split, as_parsed,
                    extract_events_lexicon, parse_query, query_text, split_query)

__all__ = ["Evidence", "Motion", "ParsedQuery", "Qualifiers", "Split", "as_parsed",
           "extract_events_lexicon", "parse_query", "query_text", "split_query"]
