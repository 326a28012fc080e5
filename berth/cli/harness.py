"""What the commands that start or drive a server share: ``berth serve``, ``berth bench`` (the tools
themselves are in :mod:`berth.testbed`)."""

from __future__ import annotations

import os

# Worker processes of ``berth serve`` unless told otherwise: one per core, at most four (to bound
# memory). One more than the cores built providers a little faster on two cores (660 providers/s with
# three workers against 599-616 with two, docs/performance.md), but Granian warns on every start that
# more workers than cores may lower throughput: a default should not start with a warning, and
# --workers takes the extra one where it pays.
DEFAULT_WORKERS = min(4, os.cpu_count() or 1)
