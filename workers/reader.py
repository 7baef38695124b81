"""Reading the held models' streams in reads of a sensible size.

``read_count`` counts entries, but an entry is a whole batch: 200 entries of 1,000 examples
with 100 non-zeros each would be a 240 MB reply. The reader aims at about
:data:`READ_EXAMPLES` examples per XREAD and model, from the sizes it has seen, so memory
stays bounded and commits stay frequent whatever the clients' batch size.

(A read-ahead — the next XREAD in flight while learning — was tried and measured: no gain,
because the time goes into receiving and parsing the reply in this process, which cannot
overlap with learning on the same thread.)
"""

from __future__ import annotations

from collections.abc import Mapping

from service.store import Store, StreamEntry

Read = dict[str, list[StreamEntry]]

READ_EXAMPLES = 4_000


class Reader:
    """``await next(positions)``: the entries after each model's position."""

    def __init__(self, store: Store, count: int, block_ms: int) -> None:
        self.store, self.max_count, self.block_ms = store, count, block_ms
        self.count = min(count, 16)  # until the entry size is known

    async def next(self, positions: Mapping[str, str]) -> Read:
        """Entries after ``positions`` (``{model: last id applied}``), blocking ``block_ms``
        when there are none."""
        read = await self.store.read(dict(positions), self.count, self.block_ms)
        entries = [e for es in read.values() for e in es]
        if entries:
            per_entry = max(1, sum(e.n or 1 for e in entries) // len(entries))
            self.count = max(1, min(self.max_count, READ_EXAMPLES // per_entry))
        return read
