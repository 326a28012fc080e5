"""``berth stress``: concurrent claimers racing for the last units, with faults, then an audit.

C claimer processes (:mod:`.claimer`, each with its own connection) loop against one server.  Each
round reads allocation candidates (or the provider list) and then, at random,

* **create**: ``PUT /allocations/{new consumer}`` with ``consumer_generation: null``;
* **replace**: ``PUT /allocations/{consumer}`` with the generation it knows;
* **move**: ``POST /allocations`` giving the consumer a new destination (or nothing: *move-away*) and
  a new *migration* consumer the old allocations, both with consumer generations;
* **delete**: ``DELETE /allocations/{consumer}``.

Every write is logged with the exact allocations it set and its outcome: acknowledged (2xx),
refused (409, 503, or a connection refused before the request was sent) or uncertain (the connection
was lost after the request was sent, a timeout, a 500).  After an uncertain write, an unexpected
consumer generation conflict or now and then after an acknowledged write, the claimer reads its
consumers back; that observation must match one of the states the log allows (:mod:`.replay`).

At the end the audit (:mod:`.audit`) reads everything back over HTTP and checks that

* no provider is over capacity: ``(total - reserved) * allocation_ratio >= used`` for every class;
* each provider's usages equal the sum of ``GET /resource_providers/{uuid}/allocations``;
* every consumer holds exactly what its last acknowledged write set (absent after a delete or a
  move-away); after an uncertain write either the old or the new state of *all* the consumers it
  named, never a mix; a refused write changed nothing; no unknown consumer holds anything;
* ``GET /allocations/{consumer}`` agrees with the providers' lists;
* no response was a 5xx other than 503, an unexpected 4xx, or an error body outside Placement's
  ``{"errors": [{"status", "title", "detail", ...}]}``; without a fault, no 503 and no lost
  connection either.

Faults (:mod:`.faults`): ``kill-worker`` (SIGKILL to one server worker, found as a child of the server
process through /proc), ``kill-server`` (SIGKILL to the server's whole process group, then the same
command again on the same port and database), ``restart-postgres`` (``pg_ctl stop -m fast`` and start
of the throwaway PostgreSQL this run started), ``failover`` (a Patroni cluster of its own,
:mod:`berth.testbed.failover`, with ``--servers`` servers on its multi-host URL; SIGKILL to the
primary's PostgreSQL, then wait for Patroni to promote the synchronous standby and for the old primary
to come back as a replica).  ``--servers N`` starts N servers on the one database and spreads the
claimers over them.

Everything is checked over HTTP; of the service's own code only the domain's capacity rule and error
codes are used.
"""

from __future__ import annotations

from berth.testbed.report import Log

log = Log("stress")
