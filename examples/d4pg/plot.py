"""The learning curve as a picture: the evaluator's return against actor steps and time."""

from __future__ import annotations


def draw_curve(curve: list[dict], path: str, title: str = "D4PG on Pendulum-v1",
               events: list[dict] = ()) -> None:
    """Writes a PNG of `curve` (Counter rows): return against actor steps, with wall time
    on a second axis below; each of `events` (Counter.record_event rows: the actor group
    scaled) a dashed line, named."""
    import matplotlib
    matplotlib.use("Agg")  # no display needed
    from matplotlib import pyplot

    figure, (by_steps, by_time) = pyplot.subplots(2, 1, figsize=(7, 6), constrained_layout=True)
    returns = [row["return"] for row in curve]
    by_steps.plot([row["actor_steps"] for row in curve], returns, marker=".")
    by_steps.set_xlabel("actor steps")
    by_time.plot([row["wall_s"] for row in curve], returns, marker=".", color="tab:green")
    by_time.set_xlabel("wall time (s)")
    for axes, where in ((by_steps, "actor_steps"), (by_time, "wall_s")):
        axes.set_ylabel("evaluator's average return")
        axes.grid(True, alpha=0.3)
        for event in events:
            axes.axvline(event[where], color="tab:red", linestyle="--", linewidth=1)
            axes.annotate(event["event"], (event[where], 0.97), xycoords=("data", "axes fraction"),
                          rotation=90, va="top", ha="right", fontsize=8, color="tab:red")
    by_steps.set_title(title)
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
