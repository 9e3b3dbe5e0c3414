"""`strived llm-check`: show the LLM settings and test the endpoint with one JSON-schema call;
`--serve-bundled` starts the bundled tiny model on loopback instead (for trying things out)."""

from __future__ import annotations

import sys
import time


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "llm-check", help="test the configured LLM endpoint (or the bundled local model)",
        description="Print the LLM settings (never the key) and ask the endpoint for one "
                    "fusion-router answer, showing the weights, whether they came from the LLM or "
                    "the offline fallback, and the time taken. Settings: STRIVED_LLM_BASE_URL, "
                    "STRIVED_LLM_MODEL, STRIVED_LLM_API_KEY (or OPENAI_API_KEY), or the config file.")
    p.add_argument("--query", default="a red car cuts into our lane from the right",
                   help="query to route (default: %(default)s)")
    p.add_argument("--config", help="LLM config file (TOML or JSON; default: see docs/llm.md)")
    p.add_argument("--serve-bundled", metavar="CACHE_DIR",
                   help="start the bundled Gemma 3 270M GGUF with xllamacpp on 127.0.0.1 "
                        "(assembled into CACHE_DIR) and test against it")
    p.add_argument("--no-cache", action="store_true",
                   help="kept for compatibility: the check never answers from the LLM answer cache "
                        "(an endpoint that is down must not look up)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..llm import LLMClient, load_llm_config  # lazy: loads numpy
    from ..retrieval.router import route  # lazy: loads numpy

    def check(cfg) -> int:
        print(cfg.describe())
        client = LLMClient(cfg, cache=None)  # a check must reach the endpoint, never the cache
        t0 = time.perf_counter()
        r = route(args.query, client)
        dt = (time.perf_counter() - t0) * 1e3
        print(f"query: {args.query}")
        print(f"weights: {r.weights}  source: {r.source}  ({dt:.0f} ms)")
        if r.reasoning:
            print(f"reasoning: {r.reasoning}")
        if r.notice:
            print(f"notice: {r.notice}", file=sys.stderr)
        if r.source == "llm" and client.n_requests == 0:  # defensive: nothing was asked
            print("notice: the endpoint was not reached", file=sys.stderr)
            return 1
        return 0 if r.source == "llm" else 1

    if args.serve_bundled:
        from ..llm.local_server import local_llm_server  # lazy: loads numpy

        with local_llm_server(cache_dir=args.serve_bundled) as srv:
            print(f"serving {srv.model_path.name} at {srv.base_url}")
            return check(srv.config())
    return check(load_llm_config(args.config))
