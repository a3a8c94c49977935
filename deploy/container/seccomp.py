"""Write the seccomp profile under which trustscore's code sandbox works in a container.

    python3 deploy/container/seccomp.py [DEFAULT] > trustscore-seccomp.json
    podman run --security-opt seccomp=trustscore-seccomp.json ... localhost/trustscore

The profile is podman's default (``/usr/share/containers/seccomp.json``, or DEFAULT) with one change:
``sethostname`` and ``setdomainname`` are allowed. The default refuses them to a container without
CAP_SYS_ADMIN even inside a new user and UTS namespace, and the sandbox names its own UTS namespace
before it runs untrusted code (docs/container.md, docs/graders.md "Sandbox"). Everything else the
default refuses stays refused. Standard library only.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

DEFAULT = Path("/usr/share/containers/seccomp.json")
ALLOWED = ("sethostname", "setdomainname")  # names in the sandbox's own UTS namespace only


def sandbox_profile(default: dict[str, Any]) -> dict[str, Any]:
    """``default`` with :data:`ALLOWED` taken out of every rule and allowed by one unconditional rule."""
    rules = []
    for rule in default["syscalls"]:
        names = [n for n in rule["names"] if n not in ALLOWED]
        if names:
            rules.append({**rule, "names": names})
    rules.append({"names": list(ALLOWED), "action": "SCMP_ACT_ALLOW"})
    return {**default, "syscalls": rules}


def main(argv: list[str]) -> int:
    source = Path(argv[1]) if len(argv) > 1 else DEFAULT
    try:
        default = json.loads(source.read_text())
        profile = sandbox_profile(default)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        print(f"seccomp.py: cannot read a seccomp profile from {source}: {exc}", file=sys.stderr)
        return 1
    json.dump(profile, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
