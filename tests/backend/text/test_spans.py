"""The Span type: a half-open, ordered character range."""

import pytest

import backend
from backend.text.spans import Span


def test_span_covers_its_text_and_orders_by_start_then_end():
    span = Span(4, 9)
    assert (len(span), span.slice("The clockmaker")) == (5, "clock")
    assert sorted([Span(3, 5), Span(0, 2), Span(0, 1)]) == [Span(0, 1), Span(0, 2), Span(3, 5)]
    assert len(Span(2, 2)) == 0


@pytest.mark.parametrize(("start", "end"), [(-1, 2), (5, 4)])
def test_invalid_span_is_refused(start, end):
    with pytest.raises(ValueError, match=rf"invalid span \[{start}, {end}\)"):
        Span(start, end)


def test_the_package_offers_the_same_type():
    assert backend.Span is Span
