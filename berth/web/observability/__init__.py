"""What operators see of any of Berth's HTTP services: request metrics, the request log, the scrape."""
