"""``python -m cudagraph_bench`` is the ``cudagraph-bench`` command."""

import sys

from cudagraph_bench.cli import main

sys.exit(main())
