"""The phases of a bench run, each on the cloud the run built: the candidate queries and the worst of
them, the claims, pick and claim against the client-side loop (with how it places and what it
checks after), preemption, and gangs."""
