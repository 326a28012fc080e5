"""The tools that drive a running server over HTTP: ``berth bench`` and ``berth stress``.

The shared pieces live here, one concept per module (the server launcher, the throwaway PostgreSQL,
the HTTP client, the layout builder, the report); each tool keeps only its own phases and checks in
its subpackage.
"""
