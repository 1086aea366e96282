"""`/health` latency while a huge DSL compiles: the server must keep answering (p99 under 100 ms).

    python -m bench.hostile_compile [--components 8000] [--probes-ms 20]

Starts `canvas2graph serve` on a free port, posts a DSL of `--components` Messages (1.7 KB of text
each, about 14 MB at 8,000) to `/api/v1/graphs/compile`, and probes `/health` every `--probes-ms`
until the verdict arrives. Prints the probes' p50, p99 and maximum, and the compile's duration.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from tests.server.helpers import Server, make_token
from tests.server.test_hostile_requests import big_dsl


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--components", type=int, default=8000, help="Messages in the DSL (default 8000: about 14 MB)")
    p.add_argument("--probes-ms", type=float, default=20.0, help="milliseconds between /health probes (default 20)")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="c2g-hostile-"))
    with Server(str(tmp / "server.db"), tmp, None, "--compile-timeout", "120") as server:
        token = make_token(server.db, "bench")
        body = json.dumps({"dsl": big_dsl(args.components, 1700)}).encode()
        result: dict = {}

        def compile_it():
            started = time.monotonic()
            reply = httpx.post(server.url + "/api/v1/graphs/compile", content=body, timeout=300,
                               headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
            result.update(seconds=time.monotonic() - started, ok=reply.json()["data"]["ok"])

        worker = threading.Thread(target=compile_it)
        worker.start()
        latencies = []
        with httpx.Client(base_url=server.url, timeout=10) as client:
            while worker.is_alive():
                started = time.monotonic()
                client.get("/health").raise_for_status()
                latencies.append((time.monotonic() - started) * 1000)
                time.sleep(args.probes_ms / 1000)
        worker.join()
    latencies.sort()
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    print(json.dumps({"dsl_mb": round(len(body) / 1e6, 1), "compile_s": round(result["seconds"], 2),
                      "compiles": result["ok"], "probes": len(latencies),
                      "health_p50_ms": round(statistics.median(latencies), 1), "health_p99_ms": round(p99, 1),
                      "health_max_ms": round(latencies[-1], 1)}))
    return 0 if p99 < 100 else 1


if __name__ == "__main__":
    sys.exit(main())
