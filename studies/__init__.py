"""Studies: experiments, probes, oracles, audits and analyses (studies/README.md, the index).

Each study is one module run as `python -m studies.<name>`. Studies import the product
(`cir_core`, `training`, `db`); nothing in the product imports a study (tests/test_layers.py)."""
