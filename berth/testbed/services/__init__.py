"""What a tool starts and talks to: ``berth serve`` and ``berth conductor`` in subprocesses, a
throwaway PostgreSQL, and the empty databases handed to them."""
