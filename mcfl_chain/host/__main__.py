"""``python -m mcfl_chain.host PLAN.json``: see :func:`mcfl_chain.host.engine.main`."""

import sys

from mcfl_chain.host.engine import main

sys.exit(main())
