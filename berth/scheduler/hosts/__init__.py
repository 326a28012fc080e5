"""The hosts one scheduling call weighs: the candidates answer, each host's state and its agent's
snapshot, the books of what the call took, and the hosts filtered and ranked."""
