"""What runs inside CodeExec's sandbox: the supervisor and the language runners.

canvas2graph never imports these: `canvas2graph.runtime.services.sandbox.local` reads them as files and copies them into
each run, where they import only the standard library.
"""
