"""The reproduction matrix: every published cell of the papers' tables, one command each.

    python -m cir_core.reproduce list [--table T] [--root DATA] [--checkpoints ckpt]
    python -m cir_core.reproduce run TABLE [--rows ID,...] --root DATA [--checkpoints ckpt] [--device cuda]
    python -m cir_core.reproduce docs --out docs/REPRODUCE.md
    python -m cir_core.reproduce rehearse --out DIR [--record]

`registry` reads and validates the cells (`published.json`; `rehearsal.json`, whose values were
recorded on the project's machine from the generated world), `needs` says what a row needs and
whether it is here, `runner` runs rows through the one evaluation loop (`cir_core.eval.loop`),
`report` writes published vs measured vs Δ, `docs` makes `list`'s text and docs/REPRODUCE.md,
`rehearsal` exports the world's datasets and records the rehearsal's values. docs/REPRODUCE.md.
"""
