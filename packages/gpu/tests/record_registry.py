"""A stand-in for the session's op registry, as far as a hand kernel's fallback reads it (``ctx.ops[op].kernel``):
every op's record has the one kernel given."""


class Records:
    def __init__(self, kernel) -> None:
        self._kernel = kernel

    def __getitem__(self, name):
        return type("Record", (), {"kernel": staticmethod(self._kernel)})
