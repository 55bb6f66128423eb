"""Short, one-line reasons from the long messages of network libraries."""

from __future__ import annotations

import re

_ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\"()\]\[]+)")
_MAX = 160


def short_reason(exc: BaseException) -> str:
    """What went wrong in a few words: "Connection refused", "no answer in time", ...

    Libraries such as requests and urllib3 nest the operating system's error several
    levels deep in one long line; a person needs only that error.
    """
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        text = str(current)
        match = _ERRNO.search(text)
        if match:
            return match.group(1).strip().rstrip(".")
        if "timed out" in text.lower() or "timeout" in type(current).__name__.lower():
            return "no answer in time"
        current = current.__cause__ or current.__context__
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= _MAX else text[: _MAX - 3] + "..."
