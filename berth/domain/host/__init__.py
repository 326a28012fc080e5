"""A compute host as claims see it, and the fitting of a request on it: pure data and functions.

The compute tracker fits its claims with this code, and a scheduler runs the same code on a host's
snapshot (``snapshot.HostSnapshot``, served by the host's agent), so that both give the same answer.

    request.py       what an instance asks: Flavor, NumaRequest, PciRequest, InstanceSpec
    tree.py          the host's providers: ProviderTree, ProviderNode, CellInfo, PciPool
    allocations.py   allocation sets (provider -> class -> amount): compared, summed, split
    assignments.py   what a claim is given: CellAssignment, PciAssignment
    usage.py         what the claims use, by provider, NUMA cell and PCI slot: HostUsage
    fitting.py       a request fitted on the tree and its usage: plan_claim, Plan
    snapshot.py      a host's tree and usage in one document, and fits() on it
    records.py       what a claim holds, in its states: ClaimRecord, MigrationContext, SourceContext
    claims.py        a claim as its caller holds it, aborting itself when its block fails: Claim, NopClaim
    errors.py        InvalidHostRequest, DoesNotFit, WrongClaimState, InvalidSnapshot
"""
