"""Logging a Redis outage as two state changes, not one line (or traceback) per failure.

During an outage every request and every background check fails the same way; logging each
would bury the one thing an operator needs: *when* Redis went away and *when* it came back.

>>> import logging
>>> o = Outage(logging.getLogger("doctest"), "API")
>>> o.went_down("Connection refused"); o.went_down("Connection refused"); o.down
True
>>> o.came_back(); o.came_back(); o.down
False
"""

from __future__ import annotations

import logging
import time


class Outage:
    """One WARNING when Redis becomes unreachable, one when it is reachable again."""

    def __init__(self, log: logging.Logger, who: str) -> None:
        self.log = log
        self.who = who
        self.since: float | None = None  # monotonic time of the first failure

    @property
    def down(self) -> bool:
        return self.since is not None

    def went_down(self, reason: str) -> None:
        if self.since is None:
            self.since = time.monotonic()
            self.log.warning(
                "%s: Redis unreachable (%s); retrying until it returns", self.who, reason
            )

    def came_back(self) -> None:
        if self.since is not None:
            seconds, self.since = time.monotonic() - self.since, None
            self.log.warning("%s: Redis reachable again after %.1f s", self.who, seconds)
