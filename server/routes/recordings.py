"""A session of an agent recorded as a regression case: `POST /agents/{id}/sessions/{sid}/record` answers
the case folder as a zip (case.json, agent.json, script.json), what `canvas2graph record` writes
(server/backend/agent_tests/record.py); `canvas2graph test` runs it once unzipped."""
from __future__ import annotations

import io
import json
import zipfile

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from canvas2graph.server.backend.agent_tests.observe import observe_session
from canvas2graph.server.backend.agent_tests.record import RecordError, case_files, slug
from canvas2graph.runtime.run.steps import ForkError
from canvas2graph.server.auth import tenant
from canvas2graph.server.errors import argument_error
from canvas2graph.server.routes.traces import _graph, _session, http_status

router = APIRouter(prefix="/api/v1", tags=["testing"], dependencies=[Depends(http_status)])


def zipped(files: dict, folder: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in files.items():
            archive.writestr(f"{folder}/{name}", json.dumps(content, ensure_ascii=False, indent=2) + "\n")
    return buffer.getvalue()


@router.post("/agents/{agent_id}/sessions/{session_id}/record",
             summary="The session as a regression case folder (a zip): its turns, the models' and tools' replies "
                     "as the script, its answers and paths as expectations",
             responses={200: {"content": {"application/zip": {}}, "description": "the case folder, zipped"}})
async def record(request: Request, agent_id: str, session_id: str, tenant_id: str = Depends(tenant)):
    session = await _session(request, tenant_id, agent_id, session_id)
    graph = await _graph(request, session)
    try:
        turns = await observe_session(graph, session.id)
        dsl = session.dsl if not isinstance(session.dsl, str) else json.loads(session.dsl)
        files = case_files(turns, dsl, name=session.name or f"session {session.id}")
    except (RecordError, ForkError) as e:
        raise argument_error(str(e))
    folder = slug(session.name or f"session-{session.id}")
    return Response(zipped(files, folder), media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{folder}.zip"'})
