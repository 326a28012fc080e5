"""``berth bench``: build a synthetic cloud through the HTTP API and measure the service.

For each host count the benchmark

1. builds the layout (compute hosts, nested GPU children, sharing disk providers in aggregates) with
   ``create_clients`` threads and reports providers created per second (:mod:`.cloud`);
2. times sequential ``GET /allocation_candidates`` requests of five kinds and of the six worst ones
   (:mod:`.worst_queries`, after adding the wide trees of :mod:`.wide_trees`), median and p95, every
   variant a tenth of its requests at a time, in turn (:mod:`.candidates`);
3. runs ``clients`` threads that claim resources as a scheduler would (candidates, then
   ``PUT /allocations/{consumer}``) for ``claims_seconds`` and counts claims, conflicts and errors;
4. checks that no provider that received claims is over-committed, and that the server's usages
   equal the sum of the claims it accepted (:mod:`.claims`);
5. reports the resident memory of the server's processes when the benchmark started the server;
6. places servers with ``POST /berth/pick`` and with the client-side loop, plain and in
   anti-affinity groups, and checks capacity and anti-affinity afterwards (:mod:`.pick_phase`);
7. puts the hosts in racks and zones and places gangs of each size, plain, within a rack, spread
   over the zones and anti-affinity, checking capacity and each gang's rule after each run
   (:mod:`.gang_phase`).

Without ``url`` every host count gets its own server (``berth serve`` in a subprocess on a free
loopback port) and its own empty database (:mod:`.rounds`).  All HTTP traffic goes to the loopback
interface, through :class:`berth.testbed.client.Client` on libcurl, so that the client's own cost, on
the same cores as the server, stays small.
"""

from __future__ import annotations

from berth.testbed.report import Log

log = Log("bench")
