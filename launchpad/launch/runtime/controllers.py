"""`Controllers`: what `lp.launch([p1, p2, ...])` returns - the controllers of the programs
launched together, a list, which also waits for and stops them all (Launchpad's launch of a
list returned one object, whose `wait()` code written for it calls)."""

from __future__ import annotations

from typing import Any


class Controllers(list):
    """The controllers of programs launched together, in the order given."""

    def wait(self, *args: Any, **kwargs: Any) -> bool:
        """`wait(...)` of each (Controller.wait's arguments); True once every one is done."""
        return all([controller.wait(*args, **kwargs) for controller in self])

    def stop(self) -> None:
        for controller in self:
            controller.stop()

    def kill(self) -> None:
        for controller in self:
            controller.kill()

    def stop_and_wait(self) -> bool:
        self.stop()
        return self.wait()
