"""What the commands that start or drive a server share: ``berth serve``, ``berth bench`` (the tools
themselves are in :mod:`berth.testbed`)."""

from __future__ import annotations

import os

# Worker processes of ``berth serve`` unless told otherwise: one more than the cores, so that one
# can run while another waits on its database; more only take turns on the cores (on two, three
# workers built providers faster than four: docs/performance.md).  At most four, to bound memory.
DEFAULT_WORKERS = min(4, (os.cpu_count() or 1) + 1)
