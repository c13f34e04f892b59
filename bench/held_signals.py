"""What holding the stop signals costs a synchronous step run in the main thread
(``flowjob_core.runtime.held_signals``): one hold and release, in the main thread (the handlers swapped
out and back: two ``sigaction`` calls per Python-handled signal) and in another thread (nothing to do).

    python bench/held_signals.py [--rounds R] [--number N]

Prints the median over rounds of the mean time per hold and release, in microseconds.
"""
from __future__ import annotations

import argparse
import statistics
import threading
import timeit

from flowjob_core.runtime.held_signals import HeldSignals


def _per_hold(number: int, rounds: int) -> float:
    def once() -> None:
        HeldSignals().hold().release()

    return 1e6 * statistics.median(t / number for t in timeit.repeat(once, number=number, repeat=rounds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--number", type=int, default=20000)
    args = parser.parse_args()
    main_thread = _per_hold(args.number, args.rounds)
    other: list[float] = []
    thread = threading.Thread(target=lambda: other.append(_per_hold(args.number, args.rounds)))
    thread.start()
    thread.join()
    print(f"hold + release, main thread: {main_thread:.2f} µs; another thread: {other[0]:.2f} µs")


if __name__ == "__main__":
    main()
