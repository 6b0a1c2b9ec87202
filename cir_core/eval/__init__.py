"""Evaluation: the one loop (`loop`: every method x scoring on a benchmark, each method's queries
composed once), the one metrics module (`metrics`), bootstrap intervals over queries (`stats`),
Chord's correction analysis (`chord_analysis`), and the command line (`cli`,
`python -m cir_core.eval`). The package imports nothing itself: `metrics` and `stats` are read by
the benchmarks, which `loop` runs."""
