"""A real scorer wrapped to count the conditional pairs it is asked for (shared by the quality and tuning tests)."""


class CountingScorer:
    """Wraps a scorer and counts its conditional calls (pairs asked for)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.info = inner.info
        self.pairs = 0

    def conditional_nll(self, pairs, *, progress=None):
        self.pairs += len(pairs)
        return self.inner.conditional_nll(pairs, progress=progress)

    def __getattr__(self, name):  # everything else is the real scorer's
        return getattr(self.inner, name)
