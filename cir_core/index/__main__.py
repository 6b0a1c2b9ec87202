"""`python -m cir_core.index build ...`: build an index folder from a gallery (see `build.py`)."""
from .build import main

raise SystemExit(main())
