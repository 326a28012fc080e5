"""An agent's id: a UUID made the first time an agent registers from a claim store, and kept beside
it (``<state_dir>/<host>.sqlite.agent_id``) for good. Its registration with the conductors carries
it, and by it the conductors tell the same agent restarted (the same claim store, at whatever
address) from a second agent started under a name a live one holds (another state folder, so
another id), which they refuse (docs/conductor.md, "Agents").

The id belongs to the claim store rather than to the machine: the claims are what a second agent
under the same name would not have. A state folder copied elsewhere carries its id along, and its
agent counts as the same; the file must not be shared by two live agents, which the store's lock
already forbids on one machine."""

from __future__ import annotations

import os
import uuid

from berth.tracker.errors import StoreError


def agent_id_path(store_path: str) -> str:
    """Where the id of the agent of the claim store at ``store_path`` is kept."""
    return store_path + ".agent_id"


def agent_id(store_path: str) -> str:
    """The id kept beside the claim store at ``store_path``, made and written the first time. The
    caller holds the store's lock, so no other agent makes one at the same moment. ``StoreError``
    for a file that holds something else than an id: made again, the id would be another agent's,
    refused by the conductors while the host is up, so it is the operator's to delete."""
    path = agent_id_path(store_path)
    try:
        with open(path, encoding="ascii") as kept:
            text = kept.read().strip()
    except FileNotFoundError:
        return _made(path)
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"the agent's id in {path} cannot be read ({e})") from None
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise StoreError(
            f"{path} holds {text[:40]!r}, not an agent's id (a UUID): delete it and the agent makes a new one, "
            "which the conductors take for another agent's until the host is seen down"
        ) from None


def _made(path: str) -> str:
    """A new id, written to a file of its own, flushed and renamed into ``path`` (then the folder
    flushed): a crash leaves either no id, or the whole id, never half of one."""
    made = str(uuid.uuid4())
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    temporary = path + ".new"
    with open(temporary, "w", encoding="ascii") as handle:
        handle.write(made + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return made
