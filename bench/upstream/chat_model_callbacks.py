"""What `BaseChatModel.ainvoke` adds around the provider call when no callback handler, tracer or cache is set.

    python -m bench.upstream.chat_model_callbacks

A chat model that answers at once (langchain-core's own `GenericFakeChatModel`), called N times through
`ainvoke` and through `_agenerate` directly. The difference is the callback manager's configure, the
run start and end, metadata merging and message formatting for tracers that are not there.
"""
from __future__ import annotations

import asyncio
import itertools
import time

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage

CALLS = 2000


async def main() -> None:
    model = GenericFakeChatModel(messages=itertools.cycle([AIMessage("an answer")]))
    messages = [HumanMessage("a question")]
    for label, call in (("ainvoke", lambda: model.ainvoke(messages)), ("_agenerate", lambda: model._agenerate(messages))):
        for _ in range(100):
            await call()
        c0 = time.process_time()
        for _ in range(CALLS):
            await call()
        print(f"{label:>11}: {(time.process_time() - c0) * 1e6 / CALLS:.1f} µs CPU per call")


if __name__ == "__main__":
    asyncio.run(main())
