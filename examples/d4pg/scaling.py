"""The actor group scaled while the agent learns, on a schedule of actor steps.

    --scale_actors=6@20000,2@40000    6 actors from 20,000 actor steps on, 2 from 40,000

The launching process follows the counter and, at each mark, asks the program's controller
to make the group that size (`controller.scale("actor", 6)`, as `launchpad scale RUN actor 6`
would): new actors are made as the first one was and start writing into replay, removed ones
stop gracefully; the learner, the replay and the rest run on untouched. Each change is
recorded with the counter (`Counter.record_event`), with the learner's restarts then (none:
the learner is never restarted by a change of the actors), and marked on the curve's picture.
"""

from __future__ import annotations

import threading

from examples.d4pg import progress

POLL_SECS = 1.0


def parse_schedule(marks: list[str]) -> list[tuple[int, int]]:
    """["6@20000", "2@40000"] -> [(20000, 6), (40000, 2)], by actor steps.

    Raises:
      ValueError: a mark that is not COUNT@ACTOR_STEPS of positive whole numbers.
    """
    schedule = []
    for mark in marks:
        count, _, steps = mark.partition("@")
        if not (count.isdigit() and steps.isdigit() and int(count) > 0):
            raise ValueError(f"--scale_actors={','.join(marks)}: each mark is COUNT@ACTOR_STEPS "
                             f"(6@20000), got {mark!r}")
        schedule.append((int(steps), int(count)))
    return sorted(schedule)


def follow_schedule(controller, counter, schedule: list[tuple[int, int]],
                    actors: int) -> threading.Thread:
    """Starts a thread that scales the actor group at each mark of `schedule` (from
    `actors` actors), until the schedule is done or the program has ended."""
    def follow() -> None:
        size = actors
        for steps, count in schedule:
            while True:
                if controller.wait(timeout=POLL_SECS, raise_error=False):
                    return  # the program has ended (its failure is the launcher's to raise)
                counts = progress.read_counts(counter)
                if counts and counts.get("actor_steps", 0) >= steps:
                    break
            try:
                controller.scale("actor", count)
                counter.record_event(f"actors {size} -> {count}",
                                     learner_restarts=controller.restarts().get("learner/0", 0))
            except Exception as e:  # noqa: BLE001 - said (the program may be stopping)
                print(f"d4pg: scaling the actors to {count} failed: {type(e).__name__}: {e}",
                      flush=True)
                return
            print(f"d4pg: actors {size} -> {count} at {counts['actor_steps']:,.0f} actor steps",
                  flush=True)
            size = count

    thread = threading.Thread(target=follow, name="d4pg-scaling", daemon=True)
    thread.start()
    return thread
