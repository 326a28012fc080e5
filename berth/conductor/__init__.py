"""The conductor: server operations (build, delete, resize, cold and live migration, evacuation,
soft delete, shelve, rebuild and their ways back) across the scheduler, the service and the compute
agents, journaled step by step (docs/conductor.md).

    journal.py     the operations' table (SQLAlchemy Core): kind, instance, request, step, state,
                   selections, attempts, owner and heartbeat
    requests.py    ServerRequest and the destinations, as the journal keeps them
    service.py     ServiceCalls: claim leases, an instance's allocations, the host holding them
    runner.py      ConductorConfig; Runner: a step's hook, run and completion written
    fence.py       Fence: the owner name a conductor acts under, given up after a silence
    victims.py     VictimServer(s): a preempted server's host and how its flavor says it ends
    operations/    the operations' steps: build, delete, the life cycle, the moves, evacuation
    conductor.py   Conductor: the operations, the heartbeat, resume()
    errors.py      ConductorError, UnknownHost, NoValidHost (every attempt's reason)
    audit/         the cloud-wide audit behind ``berth audit`` (docs/audit.md)
"""
