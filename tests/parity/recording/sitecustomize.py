# Recording aid for the doc_generator parity case: RAGFlow names stored documents with uuid1 (time-based).
# Here uuid1 gives an id fixed by its call site, so two recordings of the same turn are identical.
import sys
import uuid
import zlib


def _fixed_uuid1(*args, **kwargs):
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.endswith("misc_utils.py"):
        frame = frame.f_back
    where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else "?"
    return uuid.UUID(int=zlib.crc32(where.encode()))


uuid.uuid1 = _fixed_uuid1
