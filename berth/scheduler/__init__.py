"""The scheduler: chooses hosts for instances, talking to the service and the agents over HTTP.

errors.py         SchedulerError, SpecError, ConfigError
request/          what one request asks:
  flavor.py         what a request spec is built from: Flavor, Image; SchedulerConfig, PciAlias
  names.py          resource class and trait names: standard, custom, normalized
  groups.py         request groups from resources[S]:CLASS and trait[S]:NAME extra specs
  image.py          traits an image asks for
  cpu.py            the CPU policy: VCPU or PCPU, the hyperthreading trait
  numa.py           the guest NUMA topology and page size
  pci.py            PCI devices: pci_passthrough:alias, one request group per device
  request_spec.py   RequestSpec, build_request_spec, the allocation candidates query
  priority.py       berth:priority and berth:preemption_action: a flavor's part in preemption
  server_group.py   ServerGroup: a policy and its members
  build_request.py  BuildRequest: the spec and the server group, as filters and weighers read them

selector.py       Selector.select_destinations: candidates, filters, weighers, claims, alternates
selection.py      Selection, Destination, Victim: a claimed host, its alternates, what it preempted
settings.py       SelectionSettings: the filters, the weighers and what they read
service.py        Service: the reads and claims the scheduler makes of the service
hosts/            the hosts of one call:
  candidates.py     the candidates answer, typed
  books.py          ProviderBooks: capacity and usage, with what one call took
  host_state.py     HostState: one candidate host, its agent's snapshot, what the call placed on it
  build.py          host states from the candidates answer; where a server group's members are
  snapshots.py      AgentSnapshots: each agent's snapshot, read once per call
  sorting.py        the filters in order, then the weighers
  ranked.py         RankedHosts: the hosts that pass every filter, best first
filters/          one module per filter
weighers/         one module per weigher, and ranking.py that adds them up
picking.py        when and how the service's pick-and-claim chooses instead
explain.py        NoValidHost and the counts its message is made of
"""
