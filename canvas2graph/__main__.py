"""`python -m canvas2graph ...` runs the `canvas2graph` command."""
import sys

from canvas2graph.cli import main

sys.exit(main())
