"""The driver node of the digits examples (resnet, megatron): trains a trainer through its
handle, printing the loss and the held-out accuracy after each call, then stops the program.
A trainer it drives has `describe()`, `step()` (its step counter: a resumed run's is not 0),
`train(steps)` and `evaluate()`."""

from __future__ import annotations

import launchpad as lp


def drive(trainer, steps: int, steps_per_call: int) -> None:
    """The driver: trains through the handle until the step counter reaches `steps`, printing
    the loss and the test accuracy after each call, then stops the program."""
    print(f"driver: training {trainer.describe()}", flush=True)
    step = trainer.step()
    if step:
        print(f"driver: resumed from step {step}", flush=True)
    losses: list[float] = []
    evaluation = None
    while step < steps:
        result = trainer.train(min(steps_per_call, steps - step))
        evaluation = trainer.evaluate()
        print(f"driver: steps {step + 1}-{result['step']}: loss {result['losses'][0]:.3f} -> "
              f"{result['losses'][-1]:.3f} ({result['steps_per_s']:.1f} steps/s), test "
              f"accuracy {evaluation['accuracy']:.3f}", flush=True)
        step = result["step"]
        losses += result["losses"]
    if len(losses) >= 3:  # one batch's loss is noisy: compare the first and last thirds'
        third = len(losses) // 3
        before, after = sum(losses[:third]) / third, sum(losses[-third:]) / third
        verdict = "fell" if after < before else "did not fall"
        print(f"driver: the loss {verdict} from {before:.3f} to {after:.3f} (means of the "
              f"first and last {third} of {len(losses)} steps)", flush=True)
    evaluation = evaluation or trainer.evaluate()
    print(f"driver: test accuracy {evaluation['accuracy']:.3f} on {evaluation['images']} "
          f"held-out digits after {evaluation['step']} steps", flush=True)
    lp.stop()
