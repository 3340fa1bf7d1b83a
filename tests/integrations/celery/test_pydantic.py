"""``@app.task(pydantic=True)``: a model-annotated argument arrives as the model (string annotations
too), a returned model is dumped to a dict; bad input fails with pydantic's ValidationError."""

from __future__ import annotations

import pydantic  # the dev extra has it
import pytest


class Numbers(pydantic.BaseModel):
    x: int
    y: int


class Total(pydantic.BaseModel):
    result: int


def test_pydantic_task_validates_arguments_and_dumps_its_result(sample_app) -> None:
    @sample_app.task(pydantic=True, name="tests.pydantic_add")
    def pydantic_add(data: Numbers) -> Total:   # string annotations (from __future__ import annotations)
        assert isinstance(data, Numbers)
        return Total(result=data.x + data.y)

    assert pydantic_add({"x": 2, "y": 3}) == {"result": 5}
    assert pydantic_add.apply(({"x": 1, "y": 1},)).get() == {"result": 2}
    assert pydantic_add(Numbers(x=4, y=4)) == {"result": 8}
    with pytest.raises(pydantic.ValidationError):
        pydantic_add({"x": "not a number", "y": 1})
