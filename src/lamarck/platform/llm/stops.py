"""Stop strings and streamed text, the same for both local engines."""

from __future__ import annotations

import queue

from lamarck.platform.llm.sampling import SamplingParams


def stop_cut(text: str, params: SamplingParams) -> int | None:
    """Where the reply ends in ``text``: before the earliest stop string or after the first ``stop_after`` match,
    whichever comes first; None while neither has appeared."""
    cuts = [i for i in (text.find(s) for s in params.stop) if i >= 0]
    cuts += [m.end() for m in (p.search(text) for p in params.stop_patterns) if m is not None]
    return min(cuts) if cuts else None


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
