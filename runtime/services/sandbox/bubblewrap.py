"""The sandbox local scripts run in: bubblewrap (`bwrap`, Debian's `bubblewrap`), which the script cannot leave.

What the script sees and can do:
- its own PID namespace: it sees only its own processes, and when the sandbox's main process (the
  supervisor) exits or bubblewrap is killed, the kernel kills every process left in it (a `setsid()`
  or double-forked grandchild included);
- its own network namespace with nothing but a loopback of its own: no address outside is reachable;
- its own IPC, UTS (hostname `sandbox`) and, where the kernel allows, cgroup namespaces;
- a filesystem of its own: a read-only root holding `/usr` (with the `/bin`, `/lib` links), the
  interpreter's own folders (a virtualenv, pyenv or nvm prefix), a few harmless files of `/etc`
  (the loader cache, time zone, fonts), a fresh `/proc` and a minimal `/dev`; the job's files under
  `/job` (read-only); and the only writable places: the scratch folder `/scratch` (its working
  directory, HOME and TMPDIR) and `/dev/shm`, both memory-backed and size-limited. Nothing else of
  the host (home folders, `/etc/passwd`, the sessions database, other jobs) exists in it;
- an empty environment: bubblewrap itself is started with none, and the script gets only PATH, LANG,
  HOME, TMPDIR and settings that keep numeric libraries small and headless. No process it can see
  holds any of this process's environment;
- no privileges: an unprivileged user in a user namespace of its own, no capabilities, `no_new_privs`,
  no further user namespaces (so no mounts of its own either), a new terminal session (no TIOCSTI into
  the caller's terminal). bubblewrap 0.8 or later (`--disable-userns`).

The process limit (RLIMIT_NPROC) counts the processes of the script's user in its own user namespace,
so each run has its own count. Run as root, bubblewrap would map that user to root outside, and the
kernel never applies the limit to root. So when this process is root, bubblewrap sets up the view as
root, then drops to an unprivileged user id of the run's own (`setpriv`, util-linux; a range no
account uses) which starts a second, unprivileged bubblewrap over that view: from there on the job
runs exactly as under an unprivileged caller (its own user namespace, where it may not create more).
"""
from __future__ import annotations

import asyncio
import glob
import os
import secrets
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from canvas2graph.runtime.services.sandbox.types import CodeRefused

SCRATCH = "/scratch"
JOB = "/job"
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
# harmless pieces of /etc that interpreters and common libraries read (loader, time zone, fonts)
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime", "/etc/alternatives",
             "/etc/fonts", "/etc/mime.types", "/etc/ssl/openssl.cnf")
SHM_MB = 64
# The user namespace the job runs in: one unprivileged user, no capabilities, no namespaces of its own.
USER = ["--unshare-user", "--disable-userns", "--uid", "65534", "--gid", "65534", "--cap-drop", "ALL"]
# A range of user ids no account or container runtime uses (systemd leaves 0x70000000-0x7ffeffff unassigned).
RUN_UID_BASE = 0x70000000
RUN_UID_SPAN = 1 << 24
INSTALL_HINT = ("install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap), "
                "configure a RAGFlow sandbox executor manager (CANVAS2GRAPH_SANDBOX_URL), or, on your own machine "
                "with canvases you trust, run `canvas2graph run --unsafe-local-code` to run scripts without isolation")


class SandboxUnusable(CodeRefused):
    """bubblewrap is missing, or cannot create its namespaces here; the message says what to do."""


@dataclass(frozen=True)
class Bubblewrap:
    """A working bubblewrap: its path, and whether it sets up as root (then the sandbox drops to a run uid)."""

    path: str
    privileged: bool
    setpriv: str | None = None


_working: dict[tuple[str, int], Bubblewrap] = {}


async def find_bubblewrap(executable: str) -> Bubblewrap:
    """The bubblewrap to use, checked by starting an empty sandbox (once per process when it works, so
    installing it later needs no restart); raises SandboxUnusable saying what to do."""
    key = (executable, os.geteuid())
    if key not in _working:
        found = await _probe(executable)
        if isinstance(found, str):
            raise SandboxUnusable(found)
        _working[key] = found
    return _working[key]


async def _probe(executable: str) -> Bubblewrap | str:
    path = shutil.which(executable)
    if path is None:
        return f"CodeExec runs scripts on this machine only inside a sandbox, and bubblewrap ({executable!r}) was not found: {INSTALL_HINT}"
    privileged = os.geteuid() == 0
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin") if privileged else None
    if privileged and setpriv is None:
        return ("CodeExec runs scripts as root only after dropping to an unprivileged user, and setpriv (util-linux) "
                "was not found: install util-linux, or run canvas2graph as an ordinary user")
    found = Bubblewrap(path, privileged, setpriv)
    argv = sandbox_argv(found, uid=run_uid(), binds=[], data={}, scratch_mb=1, command=["/bin/true"])
    try:
        proc = await asyncio.create_subprocess_exec(*argv, env={}, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    except (OSError, asyncio.TimeoutError) as e:
        return f"bubblewrap ({path}) cannot be started: {e}; {INSTALL_HINT}"
    if proc.returncode != 0:
        reason = err.decode("utf-8", errors="replace").strip() or f"exit status {proc.returncode}"
        return (f"bubblewrap ({path}) cannot create its sandbox on this machine ({reason}); CodeExec needs "
                f"bubblewrap 0.8 or later and user namespaces (kernel.unprivileged_userns_clone, or an AppArmor "
                f"profile for bwrap, may switch them off): {INSTALL_HINT}")
    return found


def run_uid() -> int:
    """A user id for one run (used when the sandbox is set up as root)."""
    return RUN_UID_BASE + secrets.randbelow(RUN_UID_SPAN)


def sandbox_argv(bwrap: Bubblewrap, *, uid: int, binds: list[str], data: dict[str, int], scratch_mb: int,
                 command: list[str]) -> list[str]:
    """bubblewrap's command line for one run.

    `binds`: host folders or files shown read-only at the same path (the interpreter's prefixes);
    `data`: path in the sandbox -> an open file descriptor whose contents become that read-only file;
    `command`: what runs inside, in /scratch.
    """
    argv = [bwrap.path, "--die-with-parent", "--new-session", "--clearenv",
            "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try",
            "--hostname", "sandbox"]
    argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"] if bwrap.privileged else USER
    argv += ["--ro-bind", "/usr", "/usr"]
    for link in ("bin", "lib", "lib64", "sbin"):
        target = os.readlink(f"/{link}") if os.path.islink(f"/{link}") else None
        if target and target.lstrip("/").startswith("usr/"):
            argv += ["--symlink", target, f"/{link}"]
        elif os.path.isdir(f"/{link}"):
            argv += ["--ro-bind", f"/{link}", f"/{link}"]
    argv += ["--perms", "0755", "--dir", "/etc", "--perms", "0755", "--dir", "/etc/ssl"]
    for path in (*ETC_FILES, *sorted(glob.glob("/etc/python3*"))):
        argv += ["--ro-bind-try", path, path]
    if bwrap.privileged and not _in_usr(bwrap.path):
        binds = [*binds, bwrap.path]            # the inner bubblewrap runs from inside
    for path in binds:
        argv += [*_parents(path), "--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev",
             "--perms", "1777", "--size", str(SHM_MB << 20), "--tmpfs", "/dev/shm",
             "--perms", "1777", "--size", str(scratch_mb << 20), "--tmpfs", SCRATCH,
             "--perms", "0755", "--dir", "/tmp",          # where the inner bubblewrap puts its own root
             "--perms", "0755", "--dir", JOB]
    for path, fd in data.items():
        argv += ["--perms", "0444", "--ro-bind-data", str(fd), path]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", SCRATCH, "--"]
    if bwrap.privileged:
        # set up as root, then an unprivileged user of the run's own makes the same user namespace an
        # unprivileged caller would, over the view set up above
        argv += [bwrap.setpriv or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                 "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--",
                 bwrap.path, *USER, "--die-with-parent", "--dev-bind", "/", "/", "--chdir", SCRATCH, "--"]
    return argv + command


def _in_usr(path: str) -> bool:
    return path == "/usr" or path.startswith("/usr/")


def _parents(path: str) -> list[str]:
    """`--dir` for each missing parent of a bind target: bubblewrap, set up as root, would make them 0700."""
    out: list[str] = []
    parts = Path(path).parts[1:-1]
    for i in range(1, len(parts) + 1):
        parent = "/" + "/".join(parts[:i])
        if _in_usr(parent):
            return []                          # inside the /usr bind, which exists already
        out += ["--perms", "0755", "--dir", parent]
    return out


def interpreter_roots(executable: str, prefixes: tuple[str, ...] = ()) -> list[str]:
    """The host folders an interpreter needs, to bind read-only: its install prefix (the folder above
    `bin/`, symlinks followed) and `prefixes` (a Python's sys.prefix and sys.base_prefix), minus what
    /usr holds already and folders inside others."""
    real = Path(os.path.realpath(executable))
    candidates = {str(real.parent.parent), *prefixes, str(Path(executable).absolute().parent.parent)}
    roots = sorted(p for p in candidates if p and p != "/" and not _in_usr(p) and os.path.isdir(p))
    return [p for p in roots if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in roots)]


_python_prefixes: dict[str, tuple[str, ...]] = {}


async def python_prefixes(python: str) -> tuple[str, ...]:
    """sys.prefix and sys.base_prefix of the interpreter scripts run with (this one's, or asked once)."""
    if os.path.realpath(python) == os.path.realpath(sys.executable) and python == sys.executable:
        return (sys.prefix, sys.base_prefix)
    if python not in _python_prefixes:
        proc = await asyncio.create_subprocess_exec(
            python, "-I", "-S", "-c", "import sys; print(sys.prefix); print(sys.base_prefix)", env={},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
        out, _ = await proc.communicate()
        _python_prefixes[python] = tuple(out.decode().split()) if proc.returncode == 0 else ()
    return _python_prefixes[python]
