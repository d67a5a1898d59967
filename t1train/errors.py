"""The errors the trainer refuses a job with."""


class Refused(Exception):
    """An input t1 handed over that cannot be trained on (a checksum mismatch, an unknown
    encoding or schema, routing that does not cover a chunk, a checkpoint of another shape, a
    divergent update). The command exits non-zero with its message as one line on stderr and
    writes no checkpoint."""


class Missing(Refused):
    """An object the job names is not in the store."""
