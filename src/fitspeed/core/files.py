"""Files fitspeed writes whole: written to a temporary file beside the target, then renamed.

A reader never sees a half-written file, a failed write leaves neither debris
nor a truncated target, and the temporary file's name is fresh each time
(`tempfile.NamedTemporaryFile`), so a symlink planted at a fixed name is
never followed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: str | Path, content: str | bytes) -> Path:
    """Write `content` (text as UTF-8) to `path` in one step.

    On any error the target is unchanged and no temporary file is left.
    """
    target = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    with tempfile.NamedTemporaryFile("wb", dir=target.parent, prefix=f".{target.name}.",
                                     suffix=".tmp", delete=False) as stream:
        temp = Path(stream.name)
        try:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        except BaseException:
            stream.close()
            temp.unlink(missing_ok=True)
            raise
    try:
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return target
