"""The answer's text as RAGFlow logs it: message contents in order, the thinking between think markers."""
from canvas2graph.server.backend.answer_text import message_text
from canvas2graph.server.replies import Answer

THINKING_TURN = [
    {"content": "", "start_to_think": True},
    {"content": "Let me think."},
    {"content": "", "end_to_think": True},
    {"content": "Answer."},
]


def test_a_message_adds_its_content_and_the_think_marker_it_carries():
    assert message_text({"content": "Hello"}) == "Hello"
    assert message_text({"content": "", "start_to_think": True}) == "<think>"
    assert message_text({"content": "x", "end_to_think": True}) == "x</think>"
    assert message_text({"content": None}) == ""
    assert message_text({}) == ""


def test_a_reasoning_turn_reads_with_its_thinking_between_markers():
    assert "".join(message_text(data) for data in THINKING_TURN) == "<think>Let me think.</think>Answer."


def test_the_servers_reply_adds_the_answer_up_the_same_way():
    answer = Answer()
    for data in THINKING_TURN:
        answer.add({"event": "message", "data": data})
    answer.add({"event": "message_end", "data": {"reference": {"chunks": []}}})
    assert answer.content == "<think>Let me think.</think>Answer."
