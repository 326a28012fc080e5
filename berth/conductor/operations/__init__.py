"""The server operations, each a module of steps run through the ``Runner`` and journaled as they go.

build.py       build (and unshelve after offload), rescheduling to the alternates
delete.py      delete
lifecycle.py   soft delete, restore, shelve, shelve offload (and a preempted server's), rebuild on
               the same host
preemption.py  the servers a build's pick preempted, ended (deleted or offloaded)
evacuation.py  evacuation, and the source's clean-up once it is back
moving.py      what the moves share: the hand-over to a destination, and its undo
moves.py       resize and cold migration; confirm and revert
live_migration.py
               live migration and its rollback
"""
