"""The served model's identity (backend/models/openai_compat.py): what a server says it serves."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from backend.errors import ModelError
from backend.models.chat import CHAT_SERVICE
from backend.models.openai_compat import Endpoint, ServedModel, check_answer_model, in_order


class _Entry(SimpleNamespace):
    """A ``/models`` entry: ``id`` plus the server's own fields in ``model_extra``, as the openai client parses it."""

    def __init__(self, id: str, **extra: object) -> None:
        super().__init__(id=id, model_extra=extra)


def _client(*entries: _Entry) -> SimpleNamespace:
    return SimpleNamespace(models=SimpleNamespace(list=lambda: SimpleNamespace(data=list(entries))))


def _endpoint(model: str | None) -> Endpoint:
    return Endpoint.resolve(CHAT_SERVICE, "http://127.0.0.1:9/v1", model, None)


def test_a_name_the_server_does_not_list_is_refused_in_one_line() -> None:
    with pytest.raises(ModelError) as e:
        _endpoint("gpt-4o-mini").discover(_client(_Entry("SmolLM2-135M-Instruct.gguf")))
    assert "has no model 'gpt-4o-mini'" in str(e.value) and "SmolLM2-135M-Instruct.gguf" in str(e.value)
    assert "\n" not in str(e.value)


def test_the_identity_holds_the_weights_facts_and_not_the_volatile_ones() -> None:
    meta = {"n_params": 134515008, "size": 145000000}
    a = _endpoint(None).discover(
        _client(_Entry("m", root="/w/a", created=1, owned_by="x", max_model_len=2048, meta={**meta, "n_ctx": 4096}))
    )
    # llama.cpp's meta.n_ctx is the context it was started with (-c): a serving setting, not the weights
    b = _endpoint(None).discover(
        _client(_Entry("m", root="/w/a", created=2, owned_by="y", max_model_len=4096, meta={**meta, "n_ctx": 2048}))
    )
    c = _endpoint(None).discover(_client(_Entry("m", root="/w/b", meta=meta)))
    assert a.name == "m" and a.context_length == 2048 and a.listed
    assert a.fingerprint("chat") == b.fingerprint("chat")  # created, owned_by and max_model_len change no output
    assert a.fingerprint("chat") != c.fingerprint("chat")  # other weights behind the same name
    assert a.fingerprint("chat") != a.fingerprint("remote-lm")
    assert a.fingerprint("embedder", 384) != a.fingerprint("embedder", 576)
    assert "http" not in a.identity


def test_llama_cpp_aliases_name_the_same_model() -> None:
    served = _endpoint("smol").discover(_client(_Entry("smol", aliases=["smol", "/m/smol.gguf"])))
    assert served.aliases == ("/m/smol.gguf",)
    check_answer_model(served, "/m/smol.gguf", "LLM server at http://h/v1")


def test_a_server_without_a_listing_is_trusted_with_the_name_but_says_so() -> None:
    served = _endpoint("m").discover(_client())
    assert served == ServedModel("m", listed=False)


@pytest.mark.parametrize(
    ("served", "answered", "ok"),
    [
        (ServedModel("gpt-4o-mini", others=("gpt-4o",)), "gpt-4o-mini-2024-07-18", True),
        (ServedModel("gpt-4o-mini", others=("gpt-4o",)), "gpt-4o", False),
        (ServedModel("smol.gguf"), "gpt-3.5-turbo", True),  # listed: an unlisted name is the server's habit
        (ServedModel("smol.gguf", listed=False), "gpt-3.5-turbo", False),
        (ServedModel("gpt-4o-mini", listed=False), "SmolLM2-135M-Instruct", False),
        (ServedModel("x.gguf", listed=False), "/models/x.gguf", True),
        (ServedModel("m", aliases=("/w/a",), others=("/w/a",)), "/w/a", True),
        (ServedModel("m", listed=False), None, True),
    ],
)
def test_an_answer_naming_another_model_is_refused(served: ServedModel, answered: str | None, ok: bool) -> None:
    if ok:
        check_answer_model(served, answered, "LLM server at http://h/v1")
    else:
        with pytest.raises(ModelError, match="answered a request with model"):
            check_answer_model(served, answered, "LLM server at http://h/v1")


def test_in_order_reads_answers_in_order_and_raises_the_first_error() -> None:
    seen: list[tuple[int, int]] = []
    in_order(lambda x: x * x, [3, 1, 2], lambda k, v: seen.append((k, v)), 4)
    assert seen == [(0, 9), (1, 1), (2, 4)]

    def fail(x: int) -> int:
        if x == 2:
            raise ModelError("two")
        return x

    got: list[int] = []
    with pytest.raises(ModelError, match="two"):
        in_order(fail, [1, 2, 3], lambda k, v: got.append(v), 3)
    assert got == [1]
