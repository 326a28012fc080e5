"""What a simulation ends with: the books read back (``books``), the invariants checked on them
(``invariants``), and the preemptions the service recorded (``preempted``)."""
