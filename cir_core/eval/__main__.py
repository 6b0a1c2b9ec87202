"""`python -m cir_core.eval ...`: the evaluation command line (`cli.py`)."""
from .cli import main

raise SystemExit(main())
