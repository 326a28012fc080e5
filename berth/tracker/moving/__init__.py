"""Moving an instance between hosts: the destination's claim (``move_claims``), what a host
offers in a move (``participant``), the conductor's side of the protocol (``moves``), and the
source's cleanup after an evacuation (``evacuation``)."""
