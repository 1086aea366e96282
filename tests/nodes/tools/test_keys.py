"""API keys of the web tools: the DSL's value first, else the environment's; RAGFlow's "xxx" blank counts
as no key for the tools that ship it; a missing required key names both places to set it."""
import pytest

from canvas2graph.nodes.tool import ToolError
from canvas2graph.nodes.tools.keys import PLACEHOLDER, api_key, given_key

ENV = "C2G_TEST_SERVICE_KEY"


@pytest.fixture(autouse=True)
def no_key_in_the_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)


def test_the_dsls_key_comes_first_and_is_stripped(monkeypatch):
    monkeypatch.setenv(ENV, "from-env")
    assert given_key("  from-dsl ", ENV) == "from-dsl"
    assert api_key("from-dsl", ENV, "Service") == "from-dsl"


def test_an_empty_key_falls_back_to_the_environment(monkeypatch):
    monkeypatch.setenv(ENV, " from-env ")
    for blank in (None, "", "   "):
        assert given_key(blank, ENV) == "from-env"
        assert api_key(blank, ENV, "Service") == "from-env"


def test_an_optional_key_may_be_missing():
    assert given_key(None, ENV) == ""


def test_ragflows_placeholder_counts_as_no_key_only_where_the_tool_says_so(monkeypatch):
    assert PLACEHOLDER == "xxx"
    assert given_key("xxx", ENV) == "xxx"
    assert given_key("xxx", ENV, PLACEHOLDER) == ""
    monkeypatch.setenv(ENV, "from-env")
    assert api_key(" xxx ", ENV, "Service", placeholder=PLACEHOLDER) == "from-env"


def test_a_missing_key_names_the_param_and_the_environment_variable():
    with pytest.raises(ToolError) as e:
        api_key(None, ENV, "Service")
    assert str(e.value) == f"Service needs an API key: set params.api_key in the DSL or the {ENV} environment variable"
    with pytest.raises(ToolError) as e:
        api_key("xxx", ENV, "TuShare", "token", what="a token", placeholder=PLACEHOLDER)
    assert str(e.value) == f"TuShare needs a token: set params.token in the DSL or the {ENV} environment variable"
