"""The scheduler: chooses hosts for instances, talking to the service and the agents over HTTP.

errors.py         SchedulerError, SpecError, ConfigError
flavor.py         what a request spec is built from: Flavor, Image; SchedulerConfig, PciAlias
names.py          resource class and trait names: standard, custom, normalized
groups.py         request groups from resources[S]:CLASS and trait[S]:NAME extra specs
image.py          traits an image asks for
cpu.py            the CPU policy: VCPU or PCPU, the hyperthreading trait
numa.py           the guest NUMA topology and page size
pci.py            PCI devices: pci_passthrough:alias, one request group per device
request_spec.py   RequestSpec, build_request_spec, the allocation candidates query
"""
