"""akunu-generate: the same as akunu-complete (kept for its original name)."""

from __future__ import annotations

import sys
from typing import List, Optional

from . import complete


def main(argv: Optional[List[str]] = None) -> int:
    return complete.main(argv, prog="akunu-generate")


if __name__ == "__main__":
    sys.exit(main())
