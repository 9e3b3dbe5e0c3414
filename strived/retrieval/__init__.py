"""Retrieval sources (dense, sparse, rule scores come from ``strived.rules``), the fusion router,
weighted RRF and metrics. Submodules import their heavy dependencies lazily."""
