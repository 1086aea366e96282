"""A parsed page as lines of text, broken where a browser breaks lines (the HTTP node's clean_html and
the Crawler's text mode both read pages this way)."""
from bs4 import BeautifulSoup

from canvas2graph.runtime.services.html_text import block_lines


def lines_of(html: str, blocks=("p", "div", "li")) -> list[str]:
    return [line for line in block_lines(BeautifulSoup(html, "html.parser"), blocks) if line]


def test_each_block_is_a_line_and_inline_markup_stays_in_its_line():
    html = "<div>Intro <b>bold</b> and <a href='/x'>a link</a></div><p>Second</p><ul><li>one</li><li>two</li></ul>"
    assert lines_of(html) == ["Intro bold and a link", "Second", "one", "two"]


def test_a_line_break_ends_a_line_and_whitespace_collapses():
    assert lines_of("<p>first   line<br>second\tline</p>") == ["first line", "second line"]
    assert lines_of("<p>a  <br/>   b</p>") == ["a", "b"]


def test_only_the_given_tags_are_blocks():
    html = "<section>one</section><section>two</section>"
    assert lines_of(html) == ["onetwo"]
    assert lines_of(html, blocks=("section",)) == ["one", "two"]


def test_empty_lines_are_left_for_the_caller():
    assert "" in block_lines(BeautifulSoup("<p>a</p><p>b</p>", "html.parser"), ("p",))
