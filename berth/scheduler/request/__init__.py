"""What one boot request asks of the cloud, as the scheduler works with it: the flavor and image it
is built from, its request groups, CPU policy, NUMA topology, PCI devices and priority, the
request spec they make, and the server group it joins."""
