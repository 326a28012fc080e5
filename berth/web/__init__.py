"""The HTTP plumbing Berth's HTTP services share: authentication, policy, request ids, the JSON
error body, the request observer, the collector pause and the multi-worker runner."""
