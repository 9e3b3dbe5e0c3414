"""CLI subcommands: each module exposes ``register(subparsers)``; `strived.cli` discovers them."""
