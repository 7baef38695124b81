"""Drift detection: River's ADWIN over each model's mistake rate.

The workers write history points (cumulative examples_seen, mistakes, updates). Between two
points we know how many of the Δexamples were mistakes, not which ones, so ADWIN is fed that
many 0/1 mistake indicators spread evenly over the interval (at most ``MAX_FEED`` per point,
scaled, so an old model's long history stays cheap to replay). Feeding indicators rather than
one rate per point lets ADWIN's bound tighten with the number of examples, so a jump is seen
within a few points instead of dozens.
The detector is rebuilt from the stored history by every API process, so every process — and
every restart — reports the same detections. It is fed incrementally: only points after the
last one seen are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from river import drift

MAX_FEED = 256


@dataclass(slots=True)
class Detection:
    examples_seen: int
    time: float


@dataclass(slots=True)
class DriftTracker:
    """ADWIN over one model's per-point mistake rates, plus the detections so far."""

    delta: float = 0.002
    adwin: Any = field(default=None)
    last_seen: int = 0
    last_mistakes: int = 0
    last_id: str | None = None
    detections: list[Detection] = field(default_factory=list)
    detected_now: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {self.delta}")
        self.adwin = drift.ADWIN(delta=self.delta)

    def feed(self, examples_seen: int, mistakes: int, time: float) -> bool:
        """Feed one cumulative point; True when ADWIN detects a change at it."""
        d_seen = examples_seen - self.last_seen
        if d_seen <= 0:  # a rollback or a repeated point: restart the baseline, no rate
            self.last_seen, self.last_mistakes = examples_seen, mistakes
            return False
        rate = min(1.0, max(0.0, (mistakes - self.last_mistakes) / d_seen))
        self.last_seen, self.last_mistakes = examples_seen, mistakes
        n = min(d_seen, MAX_FEED)
        ones = round(rate * n)
        detected = False
        for i in range(n):  # Bresenham-style: `ones` ones spread evenly over n samples
            bit = ((i + 1) * ones) // n - (i * ones) // n
            self.adwin.update(float(bit))
            detected = detected or bool(self.adwin.drift_detected)
        self.detected_now = detected
        if self.detected_now:
            self.detections.append(Detection(examples_seen, time))
        return self.detected_now

    def summary(self) -> dict[str, Any]:
        last = self.detections[-1] if self.detections else None
        return {
            "detected": self.detected_now,
            "detections": len(self.detections),
            "last_at_examples": last.examples_seen if last else None,
            "last_at": last.time if last else None,
        }

    def is_detection(self, examples_seen: int) -> bool:
        return any(d.examples_seen == examples_seen for d in self.detections)
