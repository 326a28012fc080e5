"""The schemas of Berth's own API under ``/berth``: picks, leases and quotas."""
