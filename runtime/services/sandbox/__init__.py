"""Code execution for CodeExec: a local bubblewrap sandbox or RAGFlow's remote sandbox, chosen by a policy.

`run_code(lang, code, arguments, policy)` returns an `Execution` (status, stdout, stderr, the value
`main` returned, artifacts). The script's own failures (errors, time and memory limits) are
executions with a non-success status; `CodeRefused` (local execution off, or no working sandbox
here: `SandboxUnusable`) and `SandboxUnavailable` (the remote one) mean the code could not be run at all.
"""
from __future__ import annotations

from typing import Any

from canvas2graph.runtime.services.sandbox.artifacts import (DOCUMENT_TYPES, ArtifactStoreError, attachment_content, owned_artifact,
                                      store_artifacts, store_document, stored_artifact)
from canvas2graph.runtime.services.sandbox.local import run_local
from canvas2graph.runtime.services.sandbox.policy import CodePolicy, CodePolicyError
from canvas2graph.runtime.services.sandbox.remote import SandboxUnavailable, run_remote
from canvas2graph.runtime.services.sandbox.bubblewrap import SandboxUnusable
from canvas2graph.runtime.services.sandbox.types import ARTIFACT_TYPES, Artifact, CodeRefused, Execution, normalize_language


async def run_code(lang: str, code: str, arguments: dict[str, Any], policy: CodePolicy) -> Execution:
    language = normalize_language(lang)          # ValueError names the language
    if policy.remote:
        return await run_remote(language, code, arguments, policy)
    if not policy.allow_local:
        raise CodeRefused("running code on this machine is disabled here and no code sandbox is configured "
                          "(set CANVAS2GRAPH_SANDBOX_URL to a RAGFlow sandbox executor manager)")
    return await run_local(language, code, arguments, policy)


__all__ = ["run_code", "CodePolicy", "CodePolicyError", "CodeRefused", "SandboxUnusable", "SandboxUnavailable", "Execution",
           "Artifact", "ARTIFACT_TYPES", "DOCUMENT_TYPES", "ArtifactStoreError", "store_artifacts", "store_document",
           "stored_artifact", "owned_artifact", "attachment_content",
           "normalize_language"]
