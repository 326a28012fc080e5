"""Server groups for the conductor's scheduling calls.

The conductor does not pass server groups to the scheduler yet (docs/conductor.md, "Not done yet").
The simulation wraps the conductor's ``Selector`` so that a call made while an operation of a
group's member runs in this thread carries that group; everything else is the scheduler's own.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from berth.scheduler.request_spec import RequestSpec
from berth.scheduler.selection import Selection
from berth.scheduler.selector import Selector
from berth.scheduler.server_group import ServerGroup


class Groups:
    """Anti-affinity groups and their members; which member this thread is working on."""

    def __init__(self) -> None:
        self.members: dict[str, list[str]] = {}
        self.of: dict[str, str] = {}
        self.lock = threading.Lock()
        self.current = threading.local()
        # Group -> held while one of its members is being placed (``placing``).
        self.placing_locks: dict[str, threading.Lock] = {}

    def join(self, group: str, instance: str) -> None:
        with self.lock:
            self.members.setdefault(group, []).append(instance)
            self.of[instance] = group

    @contextlib.contextmanager
    def placing(self, instance: str) -> Iterator[None]:
        """While a member is being placed (built, moved): no other member of its group is.

        A move hands its host over in two steps: the scheduler's reservation for the migration is
        released just before the destination claims the instance (docs/conductor.md). A member
        placed in that gap does not see the one arriving, and two members of an anti-affinity group
        can land on one host: the conductor does not keep a group's policy across moves yet, and
        the agents do not check it when they claim. Until they do, members are placed one at a time.
        """
        with self.lock:
            group = self.of.get(instance)
            lock = None if group is None else self.placing_locks.setdefault(group, threading.Lock())
        if lock is None:
            yield
            return
        with lock:
            yield

    def working_on(self, instance: str | None) -> None:
        self.current.instance = instance

    def group_now(self) -> ServerGroup | None:
        instance = getattr(self.current, "instance", None)
        with self.lock:
            group = self.of.get(instance or "")
            if group is None:
                return None
            return ServerGroup(group, "anti-affinity", frozenset(self.members[group]))


class GroupSelector:
    """The conductor's selector, with the group of the member being worked on."""

    def __init__(self, selector: Selector, groups: Groups):
        self.selector = selector
        self.groups = groups

    def select_destinations(
        self,
        spec: RequestSpec,
        num_instances: int,
        alternates: int = 2,
        *,
        server_group: ServerGroup | None = None,
        instance_uuids: Sequence[str],
    ) -> list[Selection]:
        return self.selector.select_destinations(
            spec,
            num_instances,
            alternates,
            server_group=server_group or self.groups.group_now(),
            instance_uuids=instance_uuids,
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self.selector, name)
