"""The first process of a CodeExec run: it starts the language runner under the resource limits, waits for
it, then collects the artifacts the script wrote and reports them.

`python -I -S -B supervisor.py CONFIG`, in the scratch folder (the script's working directory). In the
sandbox it is the sandbox's main process: when it exits, every process left in the sandbox's PID
namespace is killed by the kernel. It imports only the standard library (the sandbox holds the
interpreter, not canvas2graph).

CONFIG (JSON): {"argv": the runner's command line, "env": its environment, "report_fd": the pipe the
report goes to (passed to the runner too, which writes the value `main` returned there),
"limits": {"processes", "memory_bytes", "cpu_seconds", "file_bytes", "open_files"} (each optional),
"artifact_types": {".png": "image/png", ...}, "max_artifacts", "max_artifact_bytes"}.

Report: one JSON line {"exit_code": the runner's status (negative: the signal that ended it),
"artifacts": [{"name", "mime_type", "content_b64"}]}.
"""
import base64
import json
import os
import resource
import subprocess
import sys

LIMITS = {
    "processes": resource.RLIMIT_NPROC,       # processes and threads of the sandbox's user
    "memory_bytes": resource.RLIMIT_AS,
    "cpu_seconds": resource.RLIMIT_CPU,
    "file_bytes": resource.RLIMIT_FSIZE,
    "open_files": resource.RLIMIT_NOFILE,
}


def limiter(limits):
    """What runs in the runner between fork and exec: soft and hard limits alike, so the script cannot raise them."""
    def apply():
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        for name, value in limits.items():
            kind = LIMITS[name]
            hard = value + 1 if name == "cpu_seconds" else value    # SIGXCPU first, SIGKILL a second later
            _, current = resource.getrlimit(kind)
            if current != resource.RLIM_INFINITY:
                value, hard = min(value, current), min(hard, current)
            resource.setrlimit(kind, (value, hard))
    return apply


def collect(types, max_count, max_bytes):
    """Files in ./artifacts/ and, as RAGFlow's sandbox promotes them, files of an allowed type in ./.

    Symlinks, hidden and empty files, other types and files over the size limit are left out; at most
    `max_count`, artifacts/ first, each name once.
    """
    found = {}
    for folder in ("artifacts", "."):
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            if len(found) >= max_count:
                return list(found.values())
            mime = types.get(os.path.splitext(name)[1].lower())
            if mime is None or name in found or name.startswith("."):
                continue
            data = read_regular_file(os.path.join(folder, name), max_bytes)
            if data:
                found[name] = {"name": name, "mime_type": mime, "content_b64": base64.b64encode(data).decode("ascii")}
    return list(found.values())


def read_regular_file(path, max_bytes):
    """The file's bytes, or None for a symlink, a non-regular file or one over `max_bytes`."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not (info.st_mode & 0o170000 == 0o100000) or info.st_size > max_bytes:
            return None
        return f.read(max_bytes + 1)[:max_bytes]


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        config = json.load(f)
    report_fd = config["report_fd"]
    os.makedirs("artifacts", exist_ok=True)
    runner = subprocess.Popen(config["argv"], env=config["env"], stdin=subprocess.DEVNULL, pass_fds=[report_fd],
                              preexec_fn=limiter(config.get("limits") or {}))
    code = runner.wait()
    artifacts = collect(config["artifact_types"], config["max_artifacts"], config["max_artifact_bytes"])
    with os.fdopen(report_fd, "w", encoding="utf-8") as report:
        report.write(json.dumps({"exit_code": code, "artifacts": artifacts}) + "\n")


if __name__ == "__main__":
    main()
