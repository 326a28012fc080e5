"""The request metrics every HTTP service of Berth counts, by the names dashboards and alerts read
(docs/operations.md).

Under ``berth serve`` every worker process counts into files of its own in
``$PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, chosen when the library is first
imported), and whichever worker answers a scrape sums them all.  Without that variable (tests, another
WSGI server) the metrics live in this process and ``REGISTRY`` holds them.
"""

from __future__ import annotations

import os
from typing import Final

from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

from berth.web.observability.multiprocess_dir import MULTIPROCESS_DIR_VARIABLE

# Whether the metric objects below write to the shared folder: decided as they are built.
MULTIPROCESS: Final = MULTIPROCESS_DIR_VARIABLE in os.environ

# The ``_created`` series would be per process and are not written in multiprocess mode: leaving them
# out makes one process's exposition read like that of several.
disable_created_metrics()  # type: ignore[no-untyped-call]  # unannotated in prometheus_client

# Requests take from under a millisecond (reads from a worker's copies) to seconds (large candidate
# searches on a busy database).
LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REGISTRY: Final = CollectorRegistry(auto_describe=True)

HTTP_REQUESTS: Final = Counter(
    "berth_http_requests",
    "Requests answered, by route template, method and status.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
HTTP_REQUEST_DURATION: Final = Histogram(
    "berth_http_request_duration_seconds",
    "Time from a request's arrival in the application to its answer being ready, by route template and method.",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
