"""Collectives that end: every wait on the other ranks has a deadline, and a rank that leaves tells the rest.

An MPI collective blocks until every rank arrives, so one rank that stops coming (its script ended a step
early, it called sys.exit, it called barrier() where the others reduce) would leave the others waiting
forever. Here each collective is started non-blocking and waited on in a loop that gives up at a deadline
(init(timeout=...), else $LIMN_DIST_TIMEOUT, else TIMEOUT_S) and that listens for a farewell: a rank that ends
tells every other rank so on a side channel, then waits for them at its exit. A rank waiting in a collective
that hears a farewell, or reaches its deadline, says what it waited in, for how long and why, and aborts the
world: a broken run ends in seconds, named, instead of hanging.
Pipeline: nn/optim step -> distributed (world.py's collectives) -> **watchdog** -> MPI.
"""

from __future__ import annotations

import os
import pickle
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

TIMEOUT_S = 300.0  # how long a collective waits for the other ranks before it aborts the world
ABORT_GRACE_S = 0.5  # how long a failing rank waits for its message to reach the launcher before it aborts
FAREWELL = 7  # the side channel's tag for "this rank has ended"
# A rank that sent its part of the last collective may end before the others have finished that collective:
# a farewell ends a wait only when the collective has not completed this long after it arrived.
FAREWELL_GRACE_S = 2.0


@dataclass
class Watch:
    """The world's communicator, a duplicate of it for farewells, and the deadline of every wait."""

    comm: Any
    side: Any
    rank: int
    size: int
    timeout: float
    sent: list = field(default_factory=list)  # this rank's farewell sends, completed at exit


def timeout_from(value: float | None) -> float:
    """The timeout init() was given, else $LIMN_DIST_TIMEOUT, else TIMEOUT_S; a value that is not a positive
    number of seconds is a ValueError naming where it came from."""
    where, raw = (
        ("init(timeout=...)", value)
        if value is not None
        else ("LIMN_DIST_TIMEOUT", os.environ.get("LIMN_DIST_TIMEOUT"))
    )
    if raw is None:
        return TIMEOUT_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0:
        raise ValueError(f"{where} is {raw!r}: the collective timeout is a positive number of seconds")
    return seconds


def abort(watch: Watch, message: str) -> None:
    """Says why on stderr, with the rank, then ends every rank (MPI_Abort)."""
    sys.stderr.write(
        f"[limn.distributed] rank {watch.rank} of {watch.size}: {message}; aborting all {watch.size} ranks\n"
    )
    sys.stderr.flush()
    # MPICH's launcher handles the abort and the rank's output in one event loop, and may tear the job down
    # before it has forwarded what this rank just wrote: give it a moment to pass the message on first
    time.sleep(ABORT_GRACE_S)
    watch.comm.Abort(1)


def wait(watch: Watch, request: Any, what: str, at_exit: bool = False) -> None:
    """Returns when `request` completes; aborts the world when a rank has ended and the request is still not
    done FAREWELL_GRACE_S later (not at_exit, where every rank says farewell), or when the deadline passes."""
    start, pause, heard = time.monotonic(), 1e-5, None
    while not request.Test():
        if not at_exit and heard is None:
            gone = _farewell(watch)
            heard = None if gone is None else (gone, time.monotonic())
        if heard is not None and time.monotonic() - heard[1] > FAREWELL_GRACE_S:
            abort(watch, f"rank {heard[0]} ended while this rank waited for it in {what}")
        waited = time.monotonic() - start
        if waited > watch.timeout:
            abort(
                watch,
                f"{what} waited {waited:.0f} s for the other ranks (the collective timeout, {watch.timeout:g} s: "
                "limn.distributed.init(timeout=...) or LIMN_DIST_TIMEOUT sets it); a rank is stuck, or calls "
                "another collective",
            )
        time.sleep(pause)
        pause = min(2 * pause, 0.001)  # a finished collective is seen within a millisecond


def _farewell(watch: Watch) -> int | None:
    """The rank whose farewell has arrived, if one has."""
    from mpi4py import MPI

    status = MPI.Status()
    if not watch.side.Iprobe(source=MPI.ANY_SOURCE, tag=FAREWELL, status=status):
        return None
    return status.Get_source()


def say_farewell(watch: Watch) -> None:
    """At a rank's exit (atexit): tells every other rank this one has ended, waits for them all to end
    too, then takes their farewells in, so none is left in flight at MPI's finalize."""
    from mpi4py import MPI

    note = np.array([watch.rank], np.int64)
    for other in range(watch.size):
        if other != watch.rank:
            watch.sent.append(watch.side.Isend(note, dest=other, tag=FAREWELL))
    wait(watch, watch.side.Ibarrier(), "the end of the run (every rank waits for the others to end)", at_exit=True)
    got = np.zeros(1, np.int64)
    for other in range(watch.size):
        if other != watch.rank:
            watch.side.Recv(got, source=other, tag=FAREWELL)
    MPI.Request.Waitall(watch.sent)


# ---- the collectives world.py uses, each waited on ----


def barrier(watch: Watch, what: str) -> None:
    wait(watch, watch.comm.Ibarrier(), what)


def allreduce(watch: Watch, flat: np.ndarray, op: Any, what: str) -> None:
    from mpi4py import MPI

    wait(watch, watch.comm.Iallreduce(MPI.IN_PLACE, flat, op=op), what)


def bcast(watch: Watch, flat: np.ndarray, root: int, what: str) -> None:
    wait(watch, watch.comm.Ibcast(flat, root=root), what)


def allgather_object(watch: Watch, value: Any, what: str) -> list:
    """Every rank's `value` (pickled), in rank order."""
    data = np.frombuffer(pickle.dumps(value), np.uint8)
    lengths = np.zeros(watch.size, np.int64)
    wait(watch, watch.comm.Iallgather(np.array([data.size], np.int64), lengths), what)
    gathered = np.empty(int(lengths.sum()), np.uint8)
    wait(watch, watch.comm.Iallgatherv(data, [gathered, lengths]), what)
    ends = np.cumsum(lengths)
    return [pickle.loads(gathered[end - n : end].tobytes()) for n, end in zip(lengths, ends)]


def bcast_object(watch: Watch, value: Any, root: int, what: str) -> Any:
    """root's `value` (pickled) on every rank."""
    data = np.frombuffer(pickle.dumps(value), np.uint8) if watch.rank == root else None
    length = np.array([0 if data is None else data.size], np.int64)
    wait(watch, watch.comm.Ibcast(length, root=root), what)
    buf = data.copy() if data is not None else np.empty(int(length[0]), np.uint8)
    wait(watch, watch.comm.Ibcast(buf, root=root), what)
    return pickle.loads(buf.tobytes())
