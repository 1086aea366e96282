"""Record chunker parity cases with RAGFlow's own chunkers (run with the oracle's Python).

    $ORACLE_PY tests/parity/pipeline/record.py [CASE.json ...]     # default: every case in cases/

Each case file holds the component (`component`: TokenChunker, TitleChunker or Extractor), its `params`
and the `upstream` outputs it receives (a Parser's `json`, `markdown`, `text` or `html`; an Extractor's
chunks, with the `script` of its model's replies); this script runs RAGFlow's real component class
(rag/flow at the oracle's commit) on them and writes what it output as the case's `expected` (and an
Extractor's model requests as `calls`). `test_parity.py` runs canvas2graph's component on the same input.

The oracle (../shared/oracle) stubs RAGFlow's infrastructure; three more stand-ins are needed here, none
of them on the chunkers' path: `pdfplumber` and `PIL` (imported for PDF previews, which these cases
do not make), a canvas object (the component's owner), and `rag.nlp`'s chunking helpers, which the oracle's
stub of `rag.nlp` leaves out: they are copied from RAGFlow's own rag/nlp/__init__.py with the oracle's
`extract()`, so the real code runs.
"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import types
from pathlib import Path

HERE = Path(__file__).parent
ORACLE_HARNESS = Path(os.environ.get("ORACLE_HARNESS", HERE.parents[3] / "shared" / "oracle" / "harness"))


def bootstrap():
    sys.path.insert(0, str(ORACLE_HARNESS))
    import oracle_env
    oracle_env.bootstrap()
    for name in ("pdfplumber", "PIL", "PIL.Image"):
        sys.modules.setdefault(name, types.ModuleType(name))
    sys.modules["PIL"].Image = sys.modules["PIL.Image"]
    # DeepDoc's PDF parser pulls in its vision models (xgboost, onnx); the TitleChunker only calls its
    # tag remover, a one-line regex, given here as RAGFlow writes it
    pdf_parser = types.ModuleType("deepdoc.parser.pdf_parser")

    class RAGFlowPdfParser:
        @staticmethod
        def remove_tag(txt):
            import re
            return re.sub(r"@@[\t0-9.-]+?##", "", txt)
    pdf_parser.RAGFlowPdfParser = RAGFlowPdfParser
    sys.modules["deepdoc.parser.pdf_parser"] = pdf_parser
    utils = types.ModuleType("deepdoc.parser.utils")     # PDF outlines (pypdf): the cases hold no PDF
    utils.extract_pdf_outlines = lambda source: []
    sys.modules["deepdoc.parser.utils"] = utils
    import rag.nlp as nlp
    from common.token_utils import num_tokens_from_string
    from rag.nlp.delim import (compile_delimiter_pattern, has_wrapped_delimiter, normalize_text_newlines,
                               parse_delimiter_field)
    nlp.__dict__.update(num_tokens_from_string=num_tokens_from_string, Enum=__import__("enum").Enum,
                        compile_delimiter_pattern=compile_delimiter_pattern, has_wrapped_delimiter=has_wrapped_delimiter,
                        normalize_text_newlines=normalize_text_newlines, parse_delimiter_field=parse_delimiter_field,
                        logging=__import__("logging"), re=__import__("re"))
    oracle_env.extract("rag/nlp/__init__.py", [
        "naive_merge", "MergeStrategy", "_merge_paragraph_groups", "_reconstruct_text_chunk",
        "_apply_overlap_unconditional", "_compute_overlap_prefix", "not_bullet", "not_title"], nlp.__dict__)


def canvas():
    """A pipeline canvas with only what a chunker asks of its owner (RAGFlow checks it is a Graph)."""
    from agent.canvas import Graph

    class Canvas(Graph):
        _doc_id = None
        _tenant_id = "tenant"
        _kb_id = None

        def __init__(self):          # no DSL to load: the component is built by hand
            self.logs = []
            self.components = {}

        def callback(self, component_id, progress=None, message=""):
            self.logs.append((component_id, progress, message))
    return Canvas()


def run_extractor(case: dict) -> tuple[list[dict], list[dict]]:
    """RAGFlow's Extractor in a real Canvas with the oracle's scripted model: the chunks it wrote and
    the messages of every model call."""
    sys.modules.setdefault("xxhash", types.ModuleType("xxhash"))        # only its `toc` field hashes
    from run_oracle import Oracle, TENANT_ID
    oracle = Oracle()
    oracle.fake_llm.SCRIPT.load(case["script"])
    source = case["upstream_component"]
    dsl = {"components": {
        "begin": {"obj": {"component_name": "Begin", "params": {}}, "downstream": [], "upstream": []},
        source: {"obj": {"component_name": "TokenChunker", "params": {}}, "downstream": ["Extractor:P"],
                 "upstream": []},
        "Extractor:P": {"obj": {"component_name": "Extractor", "params": case["params"]}, "downstream": [],
                        "upstream": [source]}},
        "history": [], "path": [], "retrieval": [], "globals": {}}
    canvas = oracle.Canvas(json.dumps(dsl), TENANT_ID, task_id="parity", canvas_id="parity")
    canvas.get_component_obj(source).set_output("chunks", case["upstream"]["chunks"])
    extractor = canvas.get_component_obj("Extractor:P")
    asyncio.run(extractor._invoke(**case["upstream"]))
    if extractor.output("_ERROR"):
        raise RuntimeError(f"Extractor failed: {extractor.output('_ERROR')}")
    calls = [{"messages": c["messages"]} for c in oracle.fake_llm.SCRIPT.calls]
    return extractor.output("chunks"), calls


def run_case(case: dict) -> list[dict]:
    if case["component"] == "Extractor":
        chunks, case["calls"] = run_extractor(case)
        return chunks
    if case["component"] == "TokenChunker":
        from rag.flow.chunker.token_chunker import TokenChunker as cls, TokenChunkerParam as param_cls
    else:
        from rag.flow.chunker.title_chunker.title_chunker import TitleChunker as cls
        from rag.flow.chunker.title_chunker.common import TitleChunkerParam as param_cls
    param = param_cls()
    param.update(case["params"])
    param.check()
    component = cls(canvas(), case["component"] + ":P", param)
    asyncio.run(component._invoke(**case["upstream"]))
    error = component.output("_ERROR")
    if error:
        raise RuntimeError(f"{case['component']} failed: {error}")
    return component.output("chunks")


def main(paths: list[str]) -> int:
    bootstrap()
    sys.path.insert(0, str(ORACLE_HARNESS))
    files = [Path(p) for p in paths] or sorted((HERE / "cases").glob("*.json"))
    for path in files:
        case = json.loads(path.read_text(encoding="utf-8"))
        case["expected"] = run_case(case)
        case["recorded_with"] = "RAGFlow " + (ORACLE_HARNESS / "RAGFLOW_COMMIT").read_text().strip()[:8]
        path.write_text(json.dumps(case, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(case['expected'])} chunk(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
