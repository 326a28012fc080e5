"""Work spread over threads, with one flag that stops them all (Ctrl-C, SIGTERM, a fatal error)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar, cast

from berth.testbed.client import Client

PROGRESS_EVERY = 5.0

Item = TypeVar("Item")
Result = TypeVar("Result")


class Stop:
    """Set on Ctrl-C / SIGTERM (or a fatal error) so that every worker loop ends quickly."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def set(self) -> None:
        self.event.set()

    def __bool__(self) -> bool:
        return self.event.is_set()


def parallel(
    items: Iterable[Item],
    threads: int,
    work: Callable[[Item], Result],
    stop: Stop,
    *,
    client: Client | None = None,
    progress: Callable[[int], None] | None = None,
    name: str = "worker",
) -> list[Result]:
    """``work(item)`` for every item on ``threads`` threads; the results in item order.

    The first exception stops all threads and is raised again here; a set ``stop`` raises
    KeyboardInterrupt.  Each thread's connection of ``client`` is closed when the thread is done.
    ``progress(done)`` is called every few seconds while the work goes on.
    """
    todo = list(items)
    results: list[Result | None] = [None] * len(todo)
    lock = threading.Lock()
    position = iter(range(len(todo)))
    done = [0]
    failure: list[BaseException] = []

    def loop() -> None:
        try:
            while not stop and not failure:
                with lock:
                    index = next(position, None)
                if index is None:
                    return
                try:
                    results[index] = work(todo[index])
                except BaseException as e:  # noqa: BLE001 - handed to the calling thread
                    with lock:
                        failure.append(e)
                    return
                with lock:
                    done[0] += 1
        finally:
            if client is not None:
                client.close_thread()

    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
    try:
        futures = [pool.submit(loop) for _ in range(min(threads, max(1, len(todo))))]
        last = time.monotonic()
        while wait(futures, timeout=0.5).not_done:
            if progress is not None and time.monotonic() - last >= PROGRESS_EVERY:
                last = time.monotonic()
                progress(done[0])
    except BaseException:
        stop.set()
        raise
    finally:
        pool.shutdown(wait=not stop, cancel_futures=True)
    if failure:
        raise failure[0]
    if stop:
        raise KeyboardInterrupt
    return cast(list[Result], results)  # every index was filled: no failure, no stop
