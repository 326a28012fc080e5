"""What operators see of the service: Prometheus metrics, the request log and the probes' answers."""
