"""LLM: one model call built from sys_prompt, prompts and the conversation history (SPEC 3.3).

When a direct downstream is a Message (and no goto handler or structured schema), RAGFlow makes
the LLM's `content` a lazy stream that the Message consumes. Here the LLM node stores a pending
generation (the prepared messages, JSON only) and the Message runs it with `stream_generation`.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, AsyncIterator, Mapping

if TYPE_CHECKING:   # imported where used: `canvas2graph compile` loads every component without LangChain
    from langchain_core.messages import AIMessageChunk, BaseMessage

import json_repair
from pydantic import ConfigDict, Field, field_validator

from canvas2graph.compiler.dsl.refs import Template
from canvas2graph.nodes.base import Node, Params, Result, require_ref, stream_writer
from canvas2graph.nodes.registry import register
from canvas2graph.nodes.errors import classify, pause_before_retry
from canvas2graph.runtime.graph import calls
from canvas2graph.runtime.services import model_calls
from canvas2graph.runtime.services.models import ModelConfigError
from canvas2graph.nodes.prompts import citation_rules, structured_output
from canvas2graph.runtime.graph.state import GLOBALS, HISTORY, REFERENCE
from canvas2graph.runtime.graph.turn import history_messages
from canvas2graph.runtime.graph.values import PENDING, as_json_text, ref_values, render, resolve, shown_files

# Prompt blocks RAGFlow strips from sys_prompt before sending it (SPEC 3.3).
_STRIPPED_BLOCKS = re.compile(
    r"<(TASK_ANALYSIS|PLAN_GENERATION|REFLECTION|CONTEXT_SUMMARY|CONTEXT_RANKING|CITATION_GUIDELINES)>.*?</\1>",
    re.DOTALL)
_THINK_SPLIT = re.compile(r"(<think>|</think>)")
_THOUGHTS_DROPPED = re.compile(r"(User's query:|[\\]+)", re.DOTALL)
SAMPLING = ("temperature", "top_p", "presence_penalty", "frequency_penalty", "max_tokens")
# the switch RAGFlow's canvas saves beside each sampling value; the value is sent only while it is on
ENABLED_FLAG = {"temperature": "temperatureEnabled", "top_p": "topPEnabled", "presence_penalty": "presencePenaltyEnabled",
                "frequency_penalty": "frequencyPenaltyEnabled", "max_tokens": "maxTokensEnabled"}
# What RAGFlow's canvas gives a new LLM, Agent or Browser (its web `initialLlmBaseValues`: every switch on but
# max_tokens'; and the one user message its initialAgentValues has). The fields' defaults stay the engine's
# 0s, which DSLs without these keys run with (nothing sent); an editor starts a new component from these
# (nodes/schemas.py, `x-initial`).
NEW_COMPONENT = {"prompts": [{"role": "user", "content": "{sys.query}"}],
                 "temperature": 0.1, "top_p": 0.3, "presence_penalty": 0.4, "frequency_penalty": 0.7,
                 "max_tokens": 256, "temperatureEnabled": True, "topPEnabled": True,
                 "presencePenaltyEnabled": True, "frequencyPenaltyEnabled": True, "maxTokensEnabled": False}


def chosen_model(llm_id: str) -> str:
    """An `llm_id` a run can start with: an empty one is refused when the DSL is checked, not when it runs."""
    if not llm_id or not llm_id.strip():
        raise ValueError("llm_id is empty: choose a model (model@Factory, e.g. gpt-4o@OpenAI), or give a default "
                         "with --default-llm or CANVAS2GRAPH_DEFAULT_LLM")
    return llm_id


class LLMParams(Params):
    model_config = ConfigDict(json_schema_extra={"x-initial": NEW_COMPONENT})

    llm_id: str = ""
    sys_prompt: str = ""
    prompts: list[dict[str, Any]] = Field(default_factory=lambda: [{"role": "user", "content": "{sys.query}"}])
    max_tokens: int = Field(0, ge=0)
    temperature: float = Field(0, ge=0, le=1)
    top_p: float = Field(0, ge=0, le=1)
    presence_penalty: float = Field(0, ge=0, le=1)
    frequency_penalty: float = Field(0, ge=0, le=1)
    cite: bool = True
    visual_files_var: str | None = None

    @field_validator("llm_id")
    @classmethod
    def _llm_id(cls, v: str) -> str:
        return chosen_model(v)

    @field_validator("prompts", mode="before")
    @classmethod
    def _prompts(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = [{"role": "user", "content": v}]
        if not v:
            raise ValueError("prompts must not be empty")
        for p in v:
            if not isinstance(p, dict) or "content" not in p:
                raise ValueError("each prompt needs a 'role' and a 'content'")
        return v

    def gen_conf(self) -> dict[str, Any]:
        """Sampling values are sent only when the UI's switch for it (`temperatureEnabled`, `topPEnabled`...)
        is on (SPEC 3.3)."""
        conf: dict[str, Any] = {}
        for name in SAMPLING:
            value = getattr(self, name)
            if self.extra(ENABLED_FLAG[name]) and (value > 0 or (name == "temperature" and value >= 0)):
                conf[name] = value
        return conf

    def structured_schema(self) -> dict | None:
        out = self.outputs if isinstance(self.outputs, dict) else {}
        schema = out.get("structured")
        if isinstance(schema, dict) and schema.get("properties"):
            return schema
        return None


def to_langchain(messages: list[dict[str, Any]]) -> list[BaseMessage]:
    """LangChain messages. A message's `images` (data URIs) make its content a list of blocks, its text
    then each image as an OpenAI `image_url` part (which langchain-openai sends as it is); a message
    without images keeps plain string content (`canvas2graph.runtime.services.model_calls` has a faster path for those)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
    kinds = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage}
    return [kinds.get(m["role"], HumanMessage)(content=_content(m)) for m in messages]


def _content(message: Mapping[str, Any]) -> str | list[dict]:
    images = message.get("images")
    if not images:
        return message["content"]
    blocks: list[dict] = [{"type": "text", "text": message["content"]}] if message["content"] else []
    return blocks + [{"type": "image_url", "image_url": {"url": url}} for url in images]


# --- files and images in prompts (RAGFlow's LLM._prepare_prompt_variables) ----------------------------
IMAGE_URI = "data:image/"
FILES_REF = "{sys.files}"


def data_images(value: Any) -> list[str]:
    """The `data:image/...` URIs a value holds (RAGFlow's `_extract_data_images`): a string that is one,
    in lists, in dict values; of a dict with a `content` (a read file) only the content is looked at."""
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, str):
            v = v.strip()
            if v.startswith(IMAGE_URI):
                found.append(v)
        elif isinstance(v, (list, tuple, set)):
            for item in v:
                walk(item)
        elif isinstance(v, dict):
            if "content" in v:
                walk(v["content"])
            else:
                for item in v.values():
                    walk(item)

    walk(value)
    return found


def without_images(value: Any) -> Any:
    """`value` with its image URIs taken out (RAGFlow's `_remove_data_images`): None for an image, lists
    and dicts without the items that were images (or became empty), read files as their content."""
    value = shown_files(value)
    if isinstance(value, str):
        return None if value.strip().startswith(IMAGE_URI) else value
    if isinstance(value, (list, tuple, set)):
        kept = [without_images(item) for item in value]
        kept = [v for v in kept if v is not None and not (isinstance(v, (list, tuple, dict)) and not v)]
        return tuple(kept) if isinstance(value, tuple) else kept
    if isinstance(value, dict):
        if value.get("type") in {"image_url", "input_image", "image"} and data_images(value):
            return None
        out = {}
        for k, item in value.items():
            v = without_images(item)
            if v is not None and not (isinstance(v, (list, tuple, dict)) and not v):
                out[k] = v
        return out
    return value


def _image_printer(images: list[str]):
    """How a prompt prints a value: as `as_json_text`, with the images it holds put into `images`
    instead of into the text (RAGFlow sends them to the model as images)."""
    def to_text(value: Any) -> str:
        if value is None or (isinstance(value, str) and not value.lstrip().startswith(IMAGE_URI)):
            return as_json_text(value)
        found = data_images(value)
        if found:
            images.extend(found)
            value = without_images(value)
        return as_json_text(value)
    return to_text


def unique_images(images: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in images if isinstance(i, str) and i.startswith(IMAGE_URI)))


def attach_files(messages: list[dict[str, Any]], texts: list[str], images: list[str]) -> list[dict[str, Any]]:
    """Put the turn's file texts and the images on the last user message, as RAGFlow does: the texts
    after its content ("\n\n" between), the images beside it (`images`, sent as image parts). With no
    user message, a new one carries them."""
    if not texts and not images:
        return messages
    joined = "\n\n".join(texts)
    for i in range(len(messages) - 1, -1, -1):
        if messages[i]["role"] == "user":
            message = dict(messages[i])
            if texts:
                message["content"] = (message["content"] or "") + "\n\n" + joined
            break
    else:
        message = {"role": "user", "content": joined}
        messages.append(message)
        i = len(messages) - 1
    if images:
        message["images"] = unique_images(list(message.get("images") or []) + images)
    messages[i] = message
    return messages


def text_of(content: Any) -> str:
    """A chunk's or message's text, whether content is a string or a list of blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b if isinstance(b, str) else (b.get("text") or "") for b in content
                       if isinstance(b, str) or b.get("type") == "text")
    return ""


def report_usage(message: Any, component_id: str | None = None) -> None:
    """A model call's token counts: to the run's usage (a custom stream item) and to the step trace of
    `component_id`, the component that made the call (runtime/graph/calls.py)."""
    usage = getattr(message, "usage_metadata", None)
    if usage:
        counts = {"prompt_tokens": usage.get("input_tokens", 0), "completion_tokens": usage.get("output_tokens", 0),
                  "total_tokens": usage.get("total_tokens", 0)}
        stream_writer()({"usage": counts})
        if component_id:
            calls.usage(component_id, counts)
    if component_id:        # the trace keeps the reply's reasoning: `canvas2graph record` scripts it again
        reasoning = (getattr(message, "additional_kwargs", None) or {}).get("reasoning_content")
        if not reasoning:
            found = _LEADING_THINK.match(text_of(getattr(message, "content", "")))
            reasoning = found.group(1) if found else None
        if reasoning:
            calls.reasoning(component_id, reasoning)


_LEADING_THINK = re.compile(r"\s*<think>(.*?)</think>", re.S)


async def stream_generation(pending: Mapping[str, Any], ctx, *, retries: int = 0,
                            delay: float = 0.0) -> AsyncIterator[str]:
    """Run a pending generation, yielding pieces: "<think>", reasoning, "</think>", then the answer.

    It runs inside the Message that shows it, so the producer's `max_retries` / `delay_after_error`
    (`retries`, `delay`) apply here: a retryable failure before the first piece is tried again with
    the RetryPolicy's backoff. Once a piece has been shown, a retry would repeat text the user saw.
    """
    attempt = 0
    while True:
        model = ctx.models.chat_model(pending["llm_id"], component_id=pending["component_id"],
                                      gen_conf=pending.get("gen_conf"))
        shown = False
        try:
            async for piece in merge_think_blocks(_pieces(model, pending["messages"], pending["component_id"])):
                shown = True
                yield piece
            return
        except ModelConfigError:
            raise
        except Exception as e:
            error = classify(e)
            if shown or not error.retryable or attempt >= retries:
                raise error from e
        attempt += 1
        await pause_before_retry(delay, attempt)


async def _pieces(model, messages, component_id: str | None = None) -> AsyncIterator[str]:
    reply = None
    async for piece, reply in stream_pieces(model, to_langchain(messages)):
        if piece is not None:
            yield piece
    report_usage(reply, component_id)


async def stream_pieces(model, history: list[BaseMessage]) -> AsyncIterator[tuple[str | None, AIMessageChunk | None]]:
    """One streamed model call as pieces: "<think>", reasoning, "</think>", then the answer's text.

    Yields (piece, None) while the reply streams, then (None, the whole reply) last. Reasoning comes
    either apart from the text (`reasoning_content`, as DeepSeek and vLLM send it) or inline in the text
    between `<think>` tags; both become the same markers. The chunks are merged into the reply once, at
    the end: merging LangChain chunks one by one cost more than everything else between the model's
    chunk and the `message` event it becomes.
    """
    from langchain_core.messages import AIMessageChunk
    from langchain_core.messages.ai import add_ai_message_chunks
    chunks: list[AIMessageChunk] = []
    thinking = False
    async for chunk in model_calls.stream(model, history):
        chunks.append(chunk)
        reasoning = (chunk.additional_kwargs or {}).get("reasoning_content")
        if reasoning:
            if not thinking:
                thinking = True
                yield "<think>", None
            yield reasoning, None
        text = text_of(chunk.content)
        if text:
            if thinking:
                thinking = False
                yield "</think>", None
            for piece in _THINK_SPLIT.split(text):
                if piece:
                    yield piece, None
    if thinking:
        yield "</think>", None
    start = AIMessageChunk(content="")
    yield None, add_ai_message_chunks(start, *chunks) if chunks else start


async def merge_think_blocks(pieces: AsyncIterator[str]) -> AsyncIterator[str]:
    """Show thinking that follows thinking as one block, as RAGFlow's stream splitter does.

    A block's "</think>" is held back until text follows: a "<think>" arriving first continues the
    same block, so an Agent's reasoning, its "Running the X tool..." notices and the next round's
    reasoning read as one block. A "<think>" inside a block opens nothing new; the held end is let
    out before the next text, or when the stream ends.
    """
    inside = False          # within a block whose "</think>" has not come
    closing = False         # a block has ended; its "</think>" is held back
    async for piece in pieces:
        if not piece:
            continue
        if piece == "<think>":
            if not (inside or closing):
                yield piece
            inside, closing = True, False
        elif piece == "</think>":
            inside, closing = False, True
        else:
            if closing:
                closing = False
                yield "</think>"
            yield piece
    if closing:
        yield "</think>"


class AnswerText:
    """Follows a stream of pieces and keeps what was written outside the thinking: the answer."""

    def __init__(self) -> None:
        self.thinking = False
        self._parts: list[str] = []

    def add(self, piece: str) -> None:
        if piece == "<think>":
            self.thinking = True
        elif piece == "</think>":
            self.thinking = False
        elif not self.thinking:
            self._parts.append(piece)

    @property
    def text(self) -> str:
        return "".join(self._parts)


async def complete(llm_id: str, component_id: str, messages: list[dict[str, str]], ctx,
                   gen_conf: Mapping[str, Any] | None = None) -> str:
    """A blocking call; the reasoning is kept out of the answer, as RAGFlow's LLM output is."""
    model = ctx.models.chat_model(llm_id, component_id=component_id, gen_conf=gen_conf)
    calls.prompt(component_id, messages)
    try:
        message = await model_calls.invoke(model, to_langchain(messages))
    except ModelConfigError:
        raise
    except Exception as e:
        raise classify(e) from e
    report_usage(message, component_id)
    text = text_of(message.content)
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    return text


@register("LLM", LLMParams, outputs=lambda p: {"content", "structured"})
class LLM(Node):
    reads_history = True

    def prepare(self) -> None:
        self.sys_template: Template = self.text_template(self.params.sys_prompt or "")
        self.prompt_templates: list[tuple[str, Template]] = [
            (str(p.get("role") or "user"), self.text_template(p.get("content") or "")) for p in self.params.prompts]
        # RAGFlow adds sys.files to the prompt itself unless a prompt names {sys.files} (as written)
        self.sys_names_files = FILES_REF in (self.params.sys_prompt or "")
        self.names_files = self.sys_names_files or any(FILES_REF in str(p.get("content") or "")
                                                       for p in self.params.prompts)
        visual = (self.params.visual_files_var or "").strip()
        self.visual_ref = require_ref(visual, "params.visual_files_var", "visual_files_var") if visual else None
        has_goto = self.params.exception_method == "goto" and bool(self.params.exception_goto)
        self.schema = self.params.structured_schema()
        self.streams = (not has_goto and self.schema is None
                        and any(self.canvas.type_of(d) == "Message" for d in self.downstream))

    def references(self):
        refs = [("params.sys_prompt", r) for r in self.sys_template.refs]
        for i, (_, t) in enumerate(self.prompt_templates):
            refs += [(f"params.prompts.{i}.content", r) for r in t.refs]
        if self.visual_ref is not None:
            refs.append(("params.visual_files_var", self.visual_ref))
        return refs

    def all_refs(self):
        """What the prompts name: the component's inputs (`visual_files_var` is not one, as in RAGFlow)."""
        return [r for field, r in self.references() if field != "params.visual_files_var"]

    def build_messages(self, state: Mapping[str, Any], task: str | None = None) -> list[dict[str, Any]]:
        """The messages of the call: system prompt, history, prompts, then the turn's files.

        Images in the values the prompts name, in `visual_files_var` and in `sys.files` leave the text
        and ride on the last user message as `images` (data URIs; `to_langchain` makes them image
        parts); the text of `sys.files` is added to that message, unless a prompt names `{sys.files}`.
        `task` replaces the prompts with one user prompt (a sub-agent called as a tool).
        """
        images: list[str] = []
        if self.visual_ref is not None:
            images += data_images(resolve(state, self.visual_ref))
        to_text = _image_printer(images)
        system = _STRIPPED_BLOCKS.sub("", render(self.sys_template, state, to_text=to_text)).strip()
        window = self.params.message_history_window_size
        messages: list[dict[str, Any]] = history_messages(state.get(HISTORY) or [], window)[:-1]
        prompts = self.prompt_templates if task is None else [("user", task)]
        appended = False
        for role, t in prompts:
            content = t if isinstance(t, str) else render(t, state, to_text=to_text)
            if not appended and messages and messages[-1]["role"] == role:
                messages[-1] = {"role": role, "content": content}   # RAGFlow replaces a same-role tail
            else:
                messages.append({"role": role, "content": content})
            appended = True
        names_files = self.names_files if task is None else self.sys_names_files
        texts, file_images = ([], []) if names_files else sys_files(state)
        attach_files(messages, texts, unique_images(images + file_images))
        if self.params.cite and ((state.get(REFERENCE) or {}).get("chunks")):
            # chunks already retrieved this turn: ask for [ID:n] markers (SPEC 3.3, 7)
            system = (system + "\n\n" + citation_rules()).strip()
        if self.schema is not None:
            system += "\n\n" + structured_prompt(self.schema)
        return ([{"role": "system", "content": system}] if system else []) + messages

    async def stream_pending(self, pending, ctx, sink: dict, state=None) -> AsyncIterator[str]:
        """Used by the Message that shows this LLM's pending generation."""
        async for piece in stream_generation(pending, ctx, retries=self.params.max_retries,
                                             delay=self.params.delay_after_error):
            yield piece

    def thoughts(self, state) -> str:
        try:
            # the last prompt is the last message sent; rendering it alone spares the system prompt
            # and the history, which `run` renders again in the same step (files added to it: build all)
            if self.prompt_templates and (self.names_files or not (state.get(GLOBALS) or {}).get("sys.files")):
                last = render(self.prompt_templates[-1][1], state, to_text=_image_printer([]))
            else:
                last = self.build_messages(state)[-1]["content"]
        except Exception:
            last = ""
        last = _THOUGHTS_DROPPED.sub("", last)       # as RAGFlow shows it: no "User's query:", no backslashes
        return f"⌛Give me a moment—starting from: \n\n{last}\n\nI’ll figure out our best next move."

    async def run(self, state, ctx) -> Result:
        messages = self.build_messages(state)
        check_last_message(messages)
        inputs = ref_values(self.all_refs(), state)
        llm_id, gen_conf = self.params.llm_id, self.params.gen_conf()
        if self.streams:
            pending = {PENDING: True, "component_id": self.id, "llm_id": llm_id, "gen_conf": gen_conf, "messages": messages,
                       "default": self.params.exception_default_value if self.params.exception_method == "comment" else None}
            return Result(outputs={"content": pending}, inputs=inputs)
        if self.schema is not None:
            return Result(outputs={"structured": await self._structured(messages, ctx)}, inputs=inputs)
        text = await complete(llm_id, self.id, messages, ctx, gen_conf)
        return Result(outputs={"content": text}, inputs=inputs)

    async def _structured(self, messages, ctx) -> Any:
        last_error = "no answer"
        for _ in range(self.params.max_retries + 1):
            text = await complete(self.params.llm_id, self.id, messages, ctx, self.params.gen_conf())
            value = parse_json_answer(text)
            if value is not None:
                return value
            last_error = f"the answer is not valid JSON: {text[:200]}"
        raise ValueError(last_error)


def sys_files(state: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """The turn's `sys.files` as RAGFlow's LLM reads them: (texts, image data URIs). A read file is its
    content; what is neither text nor a read file is passed over."""
    texts: list[str] = []
    images: list[str] = []
    for item in (state.get(GLOBALS) or {}).get("sys.files") or []:
        item = shown_files(item)
        if isinstance(item, str):
            (images if item.startswith(IMAGE_URI) else texts).append(item)
    return texts, images


def check_last_message(messages: list[dict[str, Any]]) -> None:
    if not messages or not (messages[-1]["content"].strip() or messages[-1].get("images")):
        raise ValueError("the last message sent to the model is empty")


def structured_prompt(schema: Mapping[str, Any]) -> str:
    return structured_output(schema)


def parse_json_answer(text: str) -> Any:
    """Drop reasoning and code fences, then repair and parse (RAGFlow uses json_repair too)."""
    if "</think>" in text:
        text = text.split("</think>", 1)[1]
    text = re.sub(r"^.*?```(?:json)?", "", text, count=1, flags=re.DOTALL) if "```" in text else text
    text = text.rsplit("```", 1)[0] if "```" in text else text
    try:
        value = json_repair.loads(text)
    except Exception:
        return None
    return value if value not in ("", None) else None
