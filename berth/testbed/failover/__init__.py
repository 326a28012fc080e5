"""A Patroni cluster on loopback, for failover tests and ``berth stress --fault failover``."""
