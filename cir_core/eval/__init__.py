"""Evaluation: the one loop (`loop`: every method x scoring on a benchmark, each method's queries
composed once), the command line (`cli`, `python -m cir_core.eval`) and the report as markdown
(`markdown`); the analyses that read the loop (Chord's correction, the progression's failures)
are studies (`studies/`), above it. The package imports nothing itself. The metrics
(`cir_core.metrics`) and the bootstrap intervals (`cir_core.stats`) sit below the benchmarks,
which `loop` runs, so that nothing here is imported by what it imports."""
