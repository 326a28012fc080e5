"""A flavor's priority and what becomes of its servers when a higher one preempts them.

``berth:priority`` (a whole number from ``MIN_PRIORITY`` to ``MAX_PRIORITY``, 0 when not given) is
the priority every pick of the flavor's servers carries, so that the service records it with their
allocations and chooses victims by it. 0 is the preemptible level: a build of a flavor above it may
take the room of servers of lower priority when nothing else fits (``POST /berth/pick`` with
``"preempt": true``); a build at 0 or below never preempts. ``berth:preemption_action`` says how a
server of the flavor ends when it is preempted: ``delete`` (the default) or ``shelve_offload``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from berth.scheduler.errors import SpecError

PRIORITY_SPEC: Final = "berth:priority"
ACTION_SPEC: Final = "berth:preemption_action"

# The service's range of priorities (a pick outside it is refused).
MIN_PRIORITY: Final = -1000
MAX_PRIORITY: Final = 1000
# The preemptible level: only builds above it preempt.
PREEMPTIBLE: Final = 0

DELETE: Final = "delete"
SHELVE_OFFLOAD: Final = "shelve_offload"
ACTIONS: Final = (DELETE, SHELVE_OFFLOAD)


def priority_of(extra_specs: Mapping[str, str]) -> int:
    """The flavor's priority; ``SpecError`` for a value that is not a whole number in range."""
    text = extra_specs.get(PRIORITY_SPEC)
    if text is None:
        return PREEMPTIBLE
    try:
        value = int(text.strip())
    except ValueError:
        raise SpecError(PRIORITY_SPEC, f"{text!r} is not a whole number") from None
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise SpecError(PRIORITY_SPEC, f"{value} is not between {MIN_PRIORITY} and {MAX_PRIORITY}")
    return value


def preemption_action(extra_specs: Mapping[str, str]) -> str:
    """How a preempted server of the flavor ends; ``SpecError`` for an unknown action."""
    action = extra_specs.get(ACTION_SPEC, DELETE)
    if action not in ACTIONS:
        raise SpecError(ACTION_SPEC, f"{action!r} is not one of {', '.join(ACTIONS)}")
    return action
