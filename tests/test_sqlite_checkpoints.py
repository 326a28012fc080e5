"""SQLite's log copied back into the database file by a thread of the writing process
(``berth.store.checkpointer``), not by the commits that hold the writers' lock."""

from __future__ import annotations

import os
import time

from berth.store import checkpointer
from berth.store.database import Database


def _fill(db: Database, rows: int) -> None:
    def write(conn):
        conn.exec_driver_sql("CREATE TABLE IF NOT EXISTS filler (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
        conn.connection.dbapi_connection.executemany(
            "INSERT INTO filler (note) VALUES (?)", [("x" * 200,) for _ in range(rows)]
        )

    db.write(write)


def test_a_writing_process_checkpoints_its_log_in_a_thread_of_its_own(tmp_path):
    path = tmp_path / "books.sqlite"
    db = Database(f"sqlite:///{path}")
    try:
        with db.engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == checkpointer.BACKSTOP_PAGES
        _fill(db, 1)
        written_at_first = os.path.getsize(path)
        # About 60 pages: far below the commits' own threshold, so only the thread copies them.
        _fill(db, 1_000)
        deadline = time.monotonic() + 10
        # (The thread counts its pass once the checkpoint has returned: the file may grow first.)
        thread = db._checkpointer
        while time.monotonic() < deadline and not (
            os.path.getsize(path) > written_at_first + 100_000 and thread is not None and thread.passes
        ):
            time.sleep(0.05)
        assert os.path.getsize(path) > written_at_first + 100_000
        assert db._checkpointer is not None and db._checkpointer.passes > 0
    finally:
        db.dispose()


def test_a_process_that_only_reads_starts_no_checkpoint_thread(tmp_path):
    path = tmp_path / "books.sqlite"
    writer = Database(f"sqlite:///{path}")
    _fill(writer, 10)
    writer.dispose()
    reader = Database(f"sqlite:///{path}")
    try:
        assert reader.read(lambda conn: conn.exec_driver_sql("SELECT COUNT(*) FROM filler").scalar()) == 10
        time.sleep(3 * checkpointer.CHECKPOINT_SECONDS)
        assert reader._checkpointer is not None and reader._checkpointer.passes == 0
    finally:
        reader.dispose()
