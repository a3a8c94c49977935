"""deploy/container/seccomp.py: podman's default seccomp profile with only sethostname/setdomainname
allowed besides (docs/container.md, "The code sandbox")."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "container" / "seccomp.py"

# The shape of podman's default (containers-common seccomp.json), cut down: a plain allow rule, the rule
# that allows some calls only with CAP_SYS_ADMIN, and its ERRNO twin for containers without it.
DEFAULT = {
    "defaultAction": "SCMP_ACT_ERRNO",
    "syscalls": [
        {"names": ["read", "unshare"], "action": "SCMP_ACT_ALLOW"},
        {
            "names": ["bpf", "sethostname"],
            "action": "SCMP_ACT_ALLOW",
            "includes": {"caps": ["CAP_SYS_ADMIN"]},
        },
        {
            "names": ["bpf", "sethostname", "setdomainname"],
            "action": "SCMP_ACT_ERRNO",
            "excludes": {"caps": ["CAP_SYS_ADMIN"]},
            "errnoRet": 1,
        },
        {"names": ["setdomainname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
    ],
}


def written(tmp_path: Path, default: object) -> subprocess.CompletedProcess[str]:
    source = tmp_path / "default.json"
    source.write_text(json.dumps(default))
    return subprocess.run([sys.executable, str(SCRIPT), str(source)], capture_output=True, text=True)


def test_only_the_two_names_are_allowed_besides(tmp_path: Path) -> None:
    r = written(tmp_path, DEFAULT)
    assert r.returncode == 0, r.stderr
    profile = json.loads(r.stdout)
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["syscalls"] == [
        DEFAULT["syscalls"][0],
        {"names": ["bpf"], "action": "SCMP_ACT_ALLOW", "includes": {"caps": ["CAP_SYS_ADMIN"]}},
        {
            "names": ["bpf"],
            "action": "SCMP_ACT_ERRNO",
            "excludes": {"caps": ["CAP_SYS_ADMIN"]},
            "errnoRet": 1,
        },
        {"names": ["sethostname", "setdomainname"], "action": "SCMP_ACT_ALLOW"},
    ]


def test_a_file_that_is_not_a_profile_is_one_line_and_non_zero(tmp_path: Path) -> None:
    r = written(tmp_path, {"syscalls": "none"})
    assert r.returncode == 1 and not r.stdout
    assert (
        r.stderr.startswith("seccomp.py: cannot read a seccomp profile") and len(r.stderr.splitlines()) == 1
    )
