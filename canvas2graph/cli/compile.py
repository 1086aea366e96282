"""`compile` and `export`: a DSL's diagnostics, and its graph as Mermaid, JSON, a picture or Python."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from canvas2graph.types import UsageError


# --- reading the DSL ----------------------------------------------------------------------------
def read_source(path: str) -> bytes:
    try:
        return Path(path).read_bytes() if path != "-" else sys.stdin.buffer.read()
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}")
    except (UnicodeError, ValueError):      # a name no file system takes (a lone surrogate, a NUL)
        raise UsageError(f"cannot read {path!r}: not a valid file name")


def read_json_file(path: str, what: str) -> Any:
    try:
        return json.loads(read_source(path))
    except json.JSONDecodeError as e:
        raise UsageError(f"{what} {path} is not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}")


# --- compile ---------------------------------------------------------------------------------
def cmd_compile(args) -> int:
    from canvas2graph.compiler.canvas import diagnose
    compiled, diags = diagnose(read_source(args.file), default_llm=args.default_llm)
    if args.format == "json":
        print(json.dumps({"ok": compiled is not None, "diagnostics": [d.to_dict() for d in diags]}, ensure_ascii=False, indent=2))
    else:
        for d in diags:
            print(f"{args.file}: {d}")
        errors = sum(d.severity == "error" for d in diags)
        warnings = len(diags) - errors
        if compiled is not None:
            print(f"{args.file}: compiles ({len(compiled.plan.nodes)} components, {warnings} warning(s))")
        else:
            print(f"{args.file}: does not compile ({errors} error(s), {warnings} warning(s))")
    return 0 if compiled is not None else 1


# --- export ----------------------------------------------------------------------------------
def agent_name(compiled, path: str) -> str:
    """What a run or a picture is named after: the agent's title (a template or agent record has
    one), else the DSL file's name; "" for a bare DSL read from stdin."""
    return compiled.plan.dsl.title or ("" if path == "-" else Path(path).stem)


def cmd_export(args) -> int:
    from canvas2graph.compiler.canvas import compile_dsl
    compiled = compile_dsl(read_source(args.file), default_llm=args.default_llm)
    if args.format in ("svg", "png"):
        from canvas2graph.compiler.picture import render
        data = render(compiled.plan, args.format, title=agent_name(compiled, args.file) or None)
    elif args.format == "dot":
        from canvas2graph.compiler.picture import to_dot
        data = to_dot(compiled.plan, title=agent_name(compiled, args.file) or None).encode()
    elif args.format == "python":
        from canvas2graph.compiler.python_writer import to_python
        data = to_python(compiled, source=None if args.file == "-" else Path(args.file).name).encode()
    elif args.format == "mermaid":
        from canvas2graph.compiler.export import to_mermaid
        data = to_mermaid(compiled.plan).encode()
    else:
        from canvas2graph.compiler.export import to_json
        data = (json.dumps(to_json(compiled.plan), ensure_ascii=False, indent=2) + "\n").encode()
    if args.out:
        try:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_bytes(data)
        except OSError as e:
            raise UsageError(f"cannot write {args.out}: {e.strerror}")
        # said on stderr: stdout stays the channel of what is exported, for pipelines and the tests that read it
        print(f"wrote {args.out} ({args.format}, {len(data):,} bytes, {len(compiled.plan.nodes)} components)",
              file=sys.stderr)
        return 0
    if args.format == "png" and sys.stdout.isatty():
        raise UsageError("a PNG is binary: write it with --out FILE (or redirect stdout to a file)")
    sys.stdout.flush()
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0
