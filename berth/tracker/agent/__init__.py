"""``berth agent``: its HTTP API for the conductors (``agent_api``) and its registration with
them (``registration``)."""
