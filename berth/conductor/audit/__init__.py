"""The cloud-wide audit (``berth audit``): the service's books against every agent's, across hosts
(docs/audit.md).

    books.py     what the audit reads: every provider's inventories and allocations, the leases,
                 and each agent's host, providers, claims, guests and own audit
    findings.py  CloudFinding and its kinds; the checks that find them in the books
    auditor.py   audit_cloud(): read, check, heal through the agents, read again; CloudReport
"""

from berth.conductor.audit.auditor import CloudReport, audit_cloud
from berth.conductor.audit.findings import KINDS, CloudFinding

__all__ = ["KINDS", "CloudFinding", "CloudReport", "audit_cloud"]
