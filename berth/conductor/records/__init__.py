"""What the conductors keep beside their journal, in the same database: the servers as their users
see them, the flavors, the server groups and the hosts whose agents registered (docs/conductor.md).

    tables.py         the four tables (SQLAlchemy Core), made with the journal's
    server_states.py  the servers' states: which action each allows, what an operation's end makes
                      of a server (pure)
    servers.py        ServerRecords: rows read and listed; the journal's companion that takes a
                      server's operation slot at an operation's start and writes its outcome at its end
    flavors.py        Flavors: create, read, delete, extra specs
    server_groups.py  ServerGroups: create, read, delete; members are the servers that name the group
    hosts.py          Hosts: registration and heartbeat, up or down, disabled or enabled
"""
