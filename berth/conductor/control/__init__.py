"""The conductors as a service: what ``berth conductor``'s API asks of them, without HTTP.

plane.py       ControlPlane: the journal and its records, the conductor, the hosts' agents; each
               action started in the background and answered with its journaled operation
actions.py     the servers' actions (resize, confirm, shelve ...) as the conductor's operations
background.py  Background: operations run on a pool of threads, their start awaited
agents.py      RegisteredAgents: the registered hosts' agents, by name, as the steps ask for them
host_books.py  what a host's registration and disabling change in the service: its zone's
               aggregate, the COMPUTE_STATUS_DISABLED trait; ZoneAggregates for the scheduler
preemptions.py the preemptions the service recorded whose servers still run, ended by the
               housekeeping; RecordedServers: the victims' servers as the records have them
"""
