"""HTTP clients of the service and of the compute agents, and the errors they raise.

    placement.py           PlacementClient: the Placement API at microversion 1.39, generation-conflict
                           retries; ConsumerState, a consumer's allocations as the service has them
    agent.py               AgentClient: a host's agent (``berth agent``), with the tracker's method names
    errors.py              every error the clients raise, under ClientError (its docstring draws the tree)
    agent_error_codes.py   the codes of the agent's error answers

The scheduler and the conductor talk to the service and to the agents through these only. What the
clients exchange that is not HTTP's own (requests, claim records, claims, host snapshots) is the
host model's, ``berth.domain.host``; the clients import nothing else of Berth.
"""
