"""Evaluation: the one loop (`loop`: every method x scoring on a benchmark, each method's queries
composed once), Chord's correction analysis (`chord_analysis`), and the command line (`cli`,
`python -m cir_core.eval`). The package imports nothing itself. The metrics (`cir_core.metrics`)
and the bootstrap intervals (`cir_core.stats`) sit below the benchmarks, which `loop` runs, so
that nothing here is imported by what it imports."""
