"""Indexing: turn a folder of videos into library records (incremental, resumable, cancellable)."""
