"""The handlers of Berth's own API under ``/berth``: picks that claim (``pick``), their leases
(``leases``), the consumers preempted (``preemptions``) and the quotas that bound the claims
(``quotas``)."""
