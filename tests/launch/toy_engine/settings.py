"""`lp.ToySettings`: the toy engine's settings (`lp.launch(..., toy=...)`)."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class ToySettings:
    greeting: str = "hello"
