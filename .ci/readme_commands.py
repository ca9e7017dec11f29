"""Print the shell commands of the README's "Two commands" section, one per line, in order.

.ci/run runs them; reading them from the README keeps CI on exactly what a newcomer types."""

from __future__ import annotations

import re
import sys
from pathlib import Path


def commands(readme: str) -> list[str]:
    section = re.search(r"^## Two commands\n(.*?)(?=^## )", readme, re.M | re.S)
    if section is None:
        raise SystemExit("README.md has no '## Two commands' section: .ci/run runs the commands written there")
    found = [block.strip() for block in re.findall(r"^```bash\n(.*?)^```", section.group(1), re.M | re.S)]
    if len(found) != 2 or any("\n" in command for command in found):
        raise SystemExit(f"README.md's 'Two commands' section must hold two one-line bash blocks, found {found!r}")
    return found


if __name__ == "__main__":
    print("\n".join(commands(Path(sys.argv[1]).read_text(encoding="utf-8"))))
