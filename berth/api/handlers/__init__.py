"""What serves each route: ``placement/`` (the Placement API, one module per noun), ``claims/``
(Berth's own API under ``/berth``), and the service's probes (``health``) and metrics."""
