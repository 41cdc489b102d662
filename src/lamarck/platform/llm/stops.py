"""Stop strings and streamed text, the same for both local engines."""

from __future__ import annotations

import queue


def first_stop(text: str, stops: list[str]) -> int | None:
    """Where the earliest stop string starts in ``text``, or None."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None


def stream_delta(stream: queue.Queue[str | None], text: str, emitted: int, stops: list[str], final: bool) -> int:
    """Put the text not yet streamed on ``stream``; return how much is streamed now.

    Until the row is final, the tail that could still become a stop string, and a half-decoded character, are held
    back, so a stop string never reaches the stream.
    """
    end = len(text)
    if not final:
        end -= max((len(s) - 1 for s in stops), default=0)
        if text.endswith("\ufffd"):
            end = min(end, len(text) - 1)
    if end > emitted:
        stream.put(text[emitted:end])
        return end
    return emitted
