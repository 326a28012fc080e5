"""The conductor: server operations (build, delete, resize, cold and live migration, evacuation,
soft delete, shelve, rebuild and their ways back) across the scheduler, the service and the compute
agents, journaled step by step (docs/conductor.md).

    journal.py     the operations' table (SQLAlchemy Core): kind, instance, request, step, state,
                   selections, attempts, owner and heartbeat
    requests.py    ServerRequest and the destinations, as the journal keeps them
    service.py     ServiceCalls: claim leases, an instance's allocations, the host holding them
    runner.py      ConductorConfig; Runner: a step's hook, run and completion written
    build.py       build (and unshelve after offload), rescheduling to the alternates
    delete.py      delete
    lifecycle.py   soft delete, restore, shelve, shelve offload, rebuild on the same host
    evacuation.py  evacuation, and the source's clean-up once it is back
    moving.py      what the moves share: the hand-over to a destination, and its undo
    moves.py       resize and cold migration; confirm and revert
    live_migration.py
                   live migration and its rollback
    conductor.py   Conductor: the operations, the heartbeat, resume()
    errors.py      ConductorError, UnknownHost, NoValidHost (every attempt's reason)
    audit/         the cloud-wide audit behind ``berth audit`` (docs/audit.md)
"""
