"""Draws agent_scaling.py's JSON: env steps/s against the number of actors, for each system and
the ideal (one panel per way of fetching weights).

Run: `python -m benchmarks.plot_scaling FIGURES.json [--out docs/images/agent_scaling.png]`
(needs matplotlib).
"""

from __future__ import annotations

import argparse
import json

COLOURS = {"ours": "#1f77b4", "ours_slurm": "#9467bd", "launchpad": "#d62728",
           "ray": "#2ca02c"}
NAMES = {"ours": "launchpad-next (local_mp)", "ours_slurm": "launchpad-next (Slurm, 3 hosts)",
         "launchpad": "DeepMind Launchpad 0.5.2 (local_mp)", "ray": "Ray actors"}


def draw(report: dict, out: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot

    runs = [r for r in report["runs"] if "error" not in r and "left_out" not in r]
    fetches = sorted({r["fetch"] for r in runs}, key=lambda fetch: fetch != "direct")
    figure, axes = pyplot.subplots(1, len(fetches), figsize=(6 * len(fetches), 4.5),
                                   squeeze=False, sharey=True)
    for axis, fetch in zip(axes[0], fetches, strict=True):
        mine = [r for r in runs if r["fetch"] == fetch]
        sizes = sorted({r["actors"] for r in mine})
        ideal = {r["actors"]: r["ideal_steps_per_s"] for r in mine}
        axis.plot(sizes, [ideal[n] for n in sizes], "k--", label="ideal (actors / step time)")
        floor = report.get("reverb_floor_cpu_us_per_step", {}).get("with_environment")
        if floor:  # what the CPUs write at one lone writer's Reverb cost (many share wake-ups)
            axis.axhline(report["machine"]["cpus"] / (floor * 1e-6), color="grey", ls=":",
                         label=f"{report['machine']['cpus']} CPUs / one Reverb writer's cost "
                               f"per step ({floor:.0f} us)")
        for system in COLOURS:
            points = sorted((r["actors"], r["env_steps_per_s"]) for r in mine
                            if r["system"] == system)
            if points:
                axis.plot(*zip(*points, strict=True), "o-", color=COLOURS[system],
                          label=NAMES[system])
        axis.set_xscale("log", base=2)
        axis.set_xticks(sizes, [str(n) for n in sizes])
        axis.set_yscale("log")
        axis.set_xlabel("actors")
        source = "through a CacherNode" if fetch == "cacher" else "from the learner"
        axis.set_title(f"weights fetched {source}")
        axis.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("environment steps / s")
    axes[0][0].legend(loc="upper left", fontsize=8)
    figure.suptitle(f"A distributed agent on {report['machine']['cpus']} CPUs: 5 ms env steps,\n"
                    "84x84x4 observations into Reverb, 4 MB weights every 100 steps", fontsize=9)
    figure.tight_layout()
    figure.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("figures", help="agent_scaling.py's JSON")
    parser.add_argument("--out", default="docs/images/agent_scaling.png")
    args = parser.parse_args()
    with open(args.figures) as f:
        draw(json.load(f), args.out)


if __name__ == "__main__":
    main()
