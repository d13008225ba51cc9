"""Schema generation from signatures: every case checked by validating sample inputs.

Each case gives inputs the produced JSON Schema must accept (and the tool's validator too),
inputs both must refuse, and "lax" inputs that only the validator accepts (pydantic's lax
coercions such as ``"3"`` for an int). Checking behaviour, not only dictionaries, catches
schemas that look right but accept or refuse the wrong values.
"""

from __future__ import annotations

import datetime as dt
import enum
import functools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

import jsonschema
import pytest
from pydantic import BaseModel, Field, TypeAdapter
from typing_extensions import NotRequired, TypedDict  # noqa: UP035 (pydantic needs it on 3.11)

from jianmu.errors import ToolDefinitionWarning, ToolInputError, ToolValidationError
from jianmu.runtime.context import RunContext
from jianmu.tools import FunctionTool, Injected, Tool, tool
from jianmu.tools.schema import function_schema, strip_titles
from jianmu.tools.spec import to_mcp_annotations, to_strict_schema

# -- types used by the signatures ----------------------------------------------------------


class Color(str, enum.Enum):  # noqa: UP042 (the str-mixin spelling users write)
    RED = "red"
    GREEN = "green"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(TypedDict):
    x: int
    y: int


class Options(TypedDict):
    verbose: bool
    depth: NotRequired[int]


@dataclass
class Box:
    width: float
    height: float = 1.0


class Address(BaseModel):
    street: str
    city: str


class Person(BaseModel):
    name: str
    address: Address
    nicknames: list[str] = []


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


class Book(BaseModel):
    title: str
    year: int | None = None


# -- the signatures ------------------------------------------------------------------------


def f_str(text: str) -> str:
    """Echo."""
    return text


def f_int(n: int) -> int:
    """Int."""
    return n


def f_float(x: float) -> float:
    """Float."""
    return x


def f_bool(flag: bool) -> bool:
    """Bool."""
    return flag


def f_opt_none(name: str | None = None) -> str:
    """Optional with None default."""
    return str(name)


def f_opt_required(name: Optional[int]) -> str:  # noqa: UP045 (the typing spelling on purpose)
    """Optional without default: required but nullable."""
    return str(name)


def f_default(n: int = 3) -> int:
    """Default."""
    return n


def f_union(v: Union[int, str]) -> str:  # noqa: UP007
    """Union."""
    return str(v)


def f_literal(mode: Literal["fast", "slow"]) -> str:
    """Literal."""
    return mode


def f_enum(color: Color) -> str:
    """Enum."""
    return color.value


def f_intenum(level: Level) -> int:
    """IntEnum."""
    return int(level)


def f_list(items: list[int]) -> int:
    """List."""
    return sum(items)


def f_list_default(tags: list[str] | None = None) -> int:
    """List default."""
    return len(tags or [])


def f_dict(scores: dict[str, int]) -> int:
    """Dict."""
    return len(scores)


def f_tuple(pair: tuple[int, str]) -> str:
    """Fixed tuple."""
    return str(pair)


def f_var_tuple(nums: tuple[int, ...]) -> int:
    """Variable tuple."""
    return len(nums)


def f_set(labels: set[str]) -> int:
    """Set."""
    return len(labels)


def f_typeddict(point: Point) -> int:
    """TypedDict."""
    return point["x"]


def f_typeddict_notrequired(opts: Options) -> bool:
    """TypedDict with NotRequired."""
    return opts["verbose"]


def f_dataclass(box: Box) -> float:
    """Dataclass."""
    return box.width


def f_nested_model(person: Person) -> str:
    """Nested model."""
    return person.name


def f_recursive(tree: Tree) -> int:
    """Recursive model."""
    return tree.value


def f_datetime(when: dt.datetime) -> str:
    """Datetime."""
    return when.isoformat()


def f_date(day: dt.date) -> str:
    """Date."""
    return day.isoformat()


def f_uuid(ident: uuid.UUID) -> str:
    """UUID."""
    return str(ident)


def f_path(path: Path) -> str:
    """Path."""
    return str(path)


def f_annotated_str(n: Annotated[int, "How many items"]) -> int:
    """Annotated string."""
    return n


def f_annotated_field(n: Annotated[int, Field(ge=1, le=10)]) -> int:
    """Annotated Field."""
    return n


def f_length(code: Annotated[str, Field(min_length=2, max_length=5)]) -> str:
    """Length bounds."""
    return code


def f_pattern(zip_code: Annotated[str, Field(pattern=r"^\d{5}$")]) -> str:
    """Pattern."""
    return zip_code


def f_field_default(limit: int = Field(10, ge=0, description="Max rows")) -> int:
    """Field as default."""
    return limit


def f_title_param(title: str, book: Book) -> str:
    """A real property named title."""
    return title


def f_google(query: str, limit: int = 5) -> list[str]:
    """Search the catalogue: by keyword.

    Longer explanation that stays.

    Args:
        query: Words to look for: several
            may be given, separated by spaces.
        limit: Maximum hits.

    Returns:
        The hits.

    Raises:
        ValueError: Never.

    Notes:
        Internal detail that must not leak.
    """
    return [query] * limit


def f_numpy(query: str, limit: int = 5) -> list[str]:
    """Search the catalogue.

    Parameters
    ----------
    query : str
        Words to look for: several
        may be given.
    limit : int, optional
        Maximum hits.

    Returns
    -------
    list
        The hits.

    Notes
    -----
    Internal detail that must not leak.
    """
    return [query] * limit


def f_sphinx(query: str, limit: int = 5) -> list[str]:
    """Search the catalogue.

    :param query: Words to look for: several
        may be given.
    :param limit: Maximum hits.
    :returns: The hits.
    :raises ValueError: Never.
    """
    return [query] * limit


def f_injected_middle(a: int, secret: Injected[str], b: int = 0) -> str:
    """Injected in the middle."""
    return f"{a}{secret}{b}"


def f_context_first(ctx: RunContext, query: str) -> str:
    """Run context first."""
    return query


def _decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


@_decorator
def f_wrapped(city: str, days: int = 1) -> str:
    """Wrapped by functools.wraps.

    Args:
        city: The city.
        days: How many days.
    """
    return city


class Service:
    def lookup(self, key: str, fresh: bool = False) -> str:
        """Bound method.

        Args:
            key: The key.
            fresh: Skip the cache.
        """
        return key


async def f_async(url: str, retries: int = 2) -> str:
    """Async."""
    return url


def f_positional_only(a: int, b: int, /) -> int:
    """Positional-only."""
    return a + b


def f_keyword_only(*, a: int, b: str = "x") -> str:
    """Keyword-only."""
    return f"{a}{b}"


def f_unannotated(name, count=2):  # type: ignore[no-untyped-def]
    """Unannotated: string, or the default's type."""
    return name * count


def f_list_models(books: list[Book]) -> int:
    """List of models."""
    return len(books)


def f_optional_model(book: Book | None = None) -> str:
    """Optional model."""
    return str(book)


def f_dict_of_lists(groups: dict[str, list[int]]) -> int:
    """Dict of lists."""
    return len(groups)


def f_decimal(amount: Decimal) -> str:
    """Decimal."""
    return str(amount)


def f_shadowing(json: str, schema: int = 0, _hidden: bool = False) -> str:
    """Names that shadow BaseModel attributes or look private."""
    return json


def f_none() -> str:
    """No parameters."""
    return "ok"


def f_any(value: Any) -> str:
    """Any."""
    return str(value)


class Callable3:
    def __call__(self, word: str, times: int = 3) -> str:
        """A callable object.

        Args:
            word: The word.
            times: Repeats.
        """
        return word * times


@dataclass
class Case:
    fn: Any
    good: list[dict[str, Any]]
    bad: list[Any]
    lax: list[dict[str, Any]] | None = None
    check: Callable[[FunctionTool, dict[str, Any]], None] | None = None


def _props(schema: dict[str, Any]) -> dict[str, Any]:
    return schema["properties"]  # type: ignore[no-any-return]


def _desc(name: str, expected: str) -> Callable[[FunctionTool, dict[str, Any]], None]:
    def check(t: FunctionTool, schema: dict[str, Any]) -> None:
        assert _props(schema)[name]["description"] == expected

    return check


def _required(*names: str) -> Callable[[FunctionTool, dict[str, Any]], None]:
    def check(t: FunctionTool, schema: dict[str, Any]) -> None:
        assert sorted(schema.get("required", [])) == sorted(names)

    return check


def _docs_check(t: FunctionTool, schema: dict[str, Any]) -> None:
    props = _props(schema)
    assert props["query"]["description"].startswith("Words to look for: several")
    assert "may be given" in props["query"]["description"]
    assert props["limit"]["description"] == "Maximum hits."
    assert "Internal detail" not in t.description
    assert "Never" not in t.description
    assert "The hits" not in t.description
    assert t.description.startswith("Search the catalogue")


def _title_check(t: FunctionTool, schema: dict[str, Any]) -> None:
    assert "title" in _props(schema)
    assert _props(schema)["title"] == {"type": "string"}
    assert "title" in schema["$defs"]["Book"]["properties"]
    assert "title" not in schema and "title" not in schema["$defs"]["Book"]


def _injected_check(t: FunctionTool, schema: dict[str, Any]) -> None:
    assert set(_props(schema)) == {"a", "b"}
    with pytest.raises(ToolInputError) as info:
        t.validate_args({"a": 1, "secret": "x"})
    assert "secret" in str(info.value)  # the unknown key the model sent, quoted back
    assert "allowed arguments: a (required), b" in str(info.value)


def _context_check(t: FunctionTool, schema: dict[str, Any]) -> None:
    assert set(_props(schema)) == {"query"}
    assert "ctx" not in str(schema)


def _recursive_check(t: FunctionTool, schema: dict[str, Any]) -> None:
    assert "$ref" in str(schema) and "Tree" in schema["$defs"]


def _shadow_check(t: FunctionTool, schema: dict[str, Any]) -> None:
    assert set(_props(schema)) == {"json", "schema", "_hidden"}
    assert t.validate_args({"json": "a", "_hidden": "true"}) == {
        "json": "a", "schema": 0, "_hidden": True,
    }


CASES: dict[str, Case] = {
    "str": Case(f_str, [{"text": "hi"}], [{}, {"text": 3}, {"text": "a", "other": 1}]),
    "int": Case(f_int, [{"n": 3}], [{"n": "x"}, {"n": 1.5}, {}], lax=[{"n": "3"}]),
    "float": Case(f_float, [{"x": 1.5}, {"x": 2}], [{"x": "abc"}], lax=[{"x": "2.5"}]),
    "bool": Case(f_bool, [{"flag": True}], [{"flag": "maybe"}], lax=[{"flag": "true"}]),
    "optional_none": Case(f_opt_none, [{}, {"name": None}, {"name": "a"}], [{"name": 3}],
                          check=_required()),
    "optional_required": Case(f_opt_required, [{"name": None}, {"name": 2}], [{}],
                              check=_required("name")),
    "default": Case(f_default, [{}, {"n": 4}], [{"n": "four"}], check=_required()),
    "union": Case(f_union, [{"v": 1}, {"v": "a"}], [{"v": [1]}]),
    "literal": Case(f_literal, [{"mode": "fast"}], [{"mode": "medium"}]),
    "enum": Case(f_enum, [{"color": "red"}], [{"color": "blue"}]),
    "intenum": Case(f_intenum, [{"level": 1}], [{"level": 3}]),
    "list": Case(f_list, [{"items": [1, 2]}], [{"items": ["a"]}, {"items": 3}],
                 lax=[{"items": "[1, 2]"}]),
    "list_default": Case(f_list_default, [{}, {"tags": ["a"]}], [{"tags": [1]}]),
    "dict": Case(f_dict, [{"scores": {"a": 1}}], [{"scores": {"a": "x"}}, {"scores": [1]}],
                 lax=[{"scores": '{"a": 1}'}]),
    "tuple": Case(f_tuple, [{"pair": [1, "a"]}], [{"pair": ["a", "a"]}]),
    "var_tuple": Case(f_var_tuple, [{"nums": [1, 2, 3]}], [{"nums": ["x"]}]),
    "set": Case(f_set, [{"labels": ["a", "b"]}], [{"labels": [1]}]),
    "typeddict": Case(f_typeddict, [{"point": {"x": 1, "y": 2}}],
                      [{"point": {"x": 1}}, {"point": {"x": "a", "y": 1}}]),
    "typeddict_notrequired": Case(f_typeddict_notrequired,
                                  [{"opts": {"verbose": True}},
                                   {"opts": {"verbose": False, "depth": 2}}],
                                  [{"opts": {"depth": 2}}]),
    "dataclass": Case(f_dataclass, [{"box": {"width": 2.0}}], [{"box": {"height": 2.0}}]),
    "nested_model": Case(f_nested_model,
                         [{"person": {"name": "a", "address": {"street": "s", "city": "c"}}}],
                         [{"person": {"name": "a", "address": {"street": "s"}}}],
                         lax=[{"person": '{"name": "a", "address": {"street": "s", '
                                         '"city": "c"}}'}]),
    "recursive": Case(f_recursive,
                      [{"tree": {"value": 1, "children": [{"value": 2, "children": []}]}}],
                      [{"tree": {"value": 1, "children": [{"children": []}]}}],
                      check=_recursive_check),
    "datetime": Case(f_datetime, [{"when": "2024-01-02T03:04:05"}], [{"when": 5.5j}]),
    "date": Case(f_date, [{"day": "2024-01-02"}], [{"day": ["x"]}]),
    "uuid": Case(f_uuid, [{"ident": str(uuid.UUID(int=1))}], [{"ident": 3}]),
    "path": Case(f_path, [{"path": "a/b.txt"}], [{"path": 3}]),
    "annotated_str": Case(f_annotated_str, [{"n": 2}], [{"n": "x"}],
                          check=_desc("n", "How many items")),
    "annotated_field": Case(f_annotated_field, [{"n": 1}, {"n": 10}], [{"n": 0}, {"n": 11}]),
    "length": Case(f_length, [{"code": "ab"}], [{"code": "a"}, {"code": "abcdef"}]),
    "pattern": Case(f_pattern, [{"zip_code": "12345"}], [{"zip_code": "1234a"}]),
    "field_default": Case(f_field_default, [{}, {"limit": 0}], [{"limit": -1}],
                          check=_desc("limit", "Max rows")),
    "title_param": Case(f_title_param, [{"title": "t", "book": {"title": "b"}}],
                        [{"title": "t", "book": {"year": 1}}], check=_title_check),
    "google": Case(f_google, [{"query": "q"}], [{"limit": 2}], check=_docs_check),
    "numpy": Case(f_numpy, [{"query": "q"}], [{"query": 1}], check=_docs_check),
    "sphinx": Case(f_sphinx, [{"query": "q", "limit": 1}], [{}], check=_docs_check),
    "injected_middle": Case(f_injected_middle, [{"a": 1}, {"a": 1, "b": 2}], [{"b": 2}],
                            check=_injected_check),
    "context_first": Case(f_context_first, [{"query": "q"}], [{"ctx": {}, "query": "q"}],
                          check=_context_check),
    "wrapped": Case(f_wrapped, [{"city": "Paris"}], [{"days": 2}],
                    check=_desc("days", "How many days.")),
    "bound_method": Case(Service().lookup, [{"key": "k"}], [{"self": 1, "key": "k"}],
                         check=_desc("fresh", "Skip the cache.")),
    "async": Case(f_async, [{"url": "u"}], [{"url": "u", "retries": "many"}]),
    "positional_only": Case(f_positional_only, [{"a": 1, "b": 2}], [{"a": 1}]),
    "keyword_only": Case(f_keyword_only, [{"a": 1}], [{"b": "y"}]),
    "unannotated": Case(f_unannotated, [{"name": "x"}, {"name": "x", "count": 3}],
                        [{"name": 1}, {"name": "x", "count": "lots"}]),
    "list_models": Case(f_list_models, [{"books": [{"title": "a"}]}], [{"books": [{}]}]),
    "optional_model": Case(f_optional_model, [{}, {"book": None}, {"book": {"title": "a"}}],
                           [{"book": {"year": 1}}]),
    "dict_of_lists": Case(f_dict_of_lists, [{"groups": {"a": [1]}}], [{"groups": {"a": 1}}]),
    "decimal": Case(f_decimal, [{"amount": "1.50"}, {"amount": 2}], [{"amount": [1]}]),
    "shadowing": Case(f_shadowing, [{"json": "a"}, {"json": "a", "schema": 1}], [{}],
                      check=_shadow_check),
    "none": Case(f_none, [{}], [{"x": 1}]),
    "callable_object": Case(Callable3(), [{"word": "w"}], [{"times": 2}],
                            check=_desc("times", "Repeats.")),
}


@pytest.mark.parametrize("case_id", list(CASES))
def test_schema_accepts_and_refuses_like_the_validator(case_id: str) -> None:
    case = CASES[case_id]
    t = tool(case.fn)
    schema = t.parameters
    validator = jsonschema.Draft202012Validator(schema)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert "title" not in schema
    for good in case.good:
        validator.validate(good)
        t.validate_args(good)
    for bad in case.bad:
        assert not validator.is_valid(bad), f"schema accepted {bad!r}"
        with pytest.raises(ToolInputError):
            t.validate_args(bad)
    for lax in case.lax or []:
        t.validate_args(lax)
    if case.check is not None:
        case.check(t, schema)


def test_there_are_at_least_forty_signatures() -> None:
    assert len(CASES) >= 40


def test_names_and_descriptions_come_from_the_function() -> None:
    t = tool(f_google)
    assert t.name == "f_google"
    assert t.description.startswith("Search the catalogue: by keyword.")
    assert "Longer explanation that stays." in t.description
    assert tool(Service().lookup).name == "lookup"
    assert tool(Callable3()).name == "Callable3"
    assert tool(f_wrapped).name == "f_wrapped"


def test_validation_coerces_and_fills_defaults() -> None:
    t = tool(f_google)
    assert t.validate_args({"query": "q", "limit": "7"}) == {"query": "q", "limit": 7}
    assert t.validate_args('{"query": "q"}') == {"query": "q", "limit": 5}
    assert t.validate_args("just a query") == {"query": "just a query", "limit": 5}


def test_json_strings_are_decoded_only_for_list_and_object_params() -> None:
    @tool
    def f(items: list[int], text: str, either: list[int] | str) -> str:
        """Doc."""
        return text

    out = f.validate_args({"items": "[1, 2]", "text": "[1, 2]", "either": "[1, 2]"})
    assert out == {"items": [1, 2], "text": "[1, 2]", "either": "[1, 2]"}
    with pytest.raises(ToolInputError, match="items"):
        f.validate_args({"items": "not json", "text": "a", "either": "a"})


def test_input_error_lists_every_problem_and_the_allowed_arguments() -> None:
    t = tool(f_google)
    with pytest.raises(ToolInputError) as info:
        t.validate_args({"limit": "many", "qurey": "typo"})
    err = info.value
    text = str(err)
    assert "unknown argument 'qurey'" in text
    assert "missing required argument 'query'" in text
    assert "limit" in text and "'many'" in text
    assert "allowed arguments: query (required), limit" in text
    assert err.tool == "f_google" and len(err.problems) == 3


def test_arguments_that_are_not_an_object_are_refused() -> None:
    t = tool(f_positional_only)
    with pytest.raises(ToolInputError, match="must be a JSON object, got list"):
        t.validate_args([1, 2])


def test_description_precedence_field_then_annotated_then_docstring() -> None:
    def f(
        a: Annotated[int, Field(description="from Field")],
        b: Annotated[int, "from Annotated"],
        c: int,
        d: Annotated[int, "from Annotated", Field(description="from Field")],
        e: int = Field(0, description="from default Field"),
    ) -> int:
        """Doc.

        Args:
            a: from docstring
            b: from docstring
            c: from docstring
            d: from docstring
            e: from docstring
        """
        return a

    props = tool(f).parameters["properties"]
    assert props["a"]["description"] == "from Field"
    assert props["b"]["description"] == "from Annotated"
    assert props["c"]["description"] == "from docstring"
    assert props["d"]["description"] == "from Field"
    assert props["e"]["description"] == "from default Field"


def test_local_classes_resolve_under_future_annotations() -> None:
    class Local(BaseModel):
        v: int

    @tool
    def f(item: Local) -> int:
        """Doc."""
        return item.v

    assert f.validate_args({"item": {"v": "2"}})["item"].v == 2


def test_output_schema_comes_from_the_return_annotation() -> None:
    assert tool(f_google).output_schema == {
        "type": "array", "items": {"type": "string"}, "description": "The hits.",
    }
    assert tool(f_nested_model).output_schema == {"type": "string"}
    assert tool(f_unannotated).output_schema == {}

    def nothing() -> None:
        """Doc."""

    assert tool(nothing).output_schema == {"type": "null"}


class Row(BaseModel):
    id: int
    tags: list[str]


def rows(env: dict[str, Any], n: int) -> list[Row]:
    """The first rows of the environment's table."""
    return [Row(id=i, tags=[]) for i in range(n)]


def test_a_tool_made_anew_per_run_describes_its_return_type_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # AgentDojo's shape: tools return pydantic models and are bound to a new environment for
    # each task; pydantic's schema of the return type took ~5 ms per tool, each time
    made: list[Any] = []
    real = TypeAdapter.json_schema

    def counted(self: TypeAdapter[Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        made.append(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(TypeAdapter, "json_schema", counted)
    first, second = (tool(functools.partial(rows, {})).output_schema for _ in range(2))
    assert first == second and first["type"] == "array" and first["$defs"]["Row"]["properties"]
    assert [repr(a) for a in made].count("TypeAdapter(list[Row])") == 1
    first["description"] = "changed"  # each tool holds its own copy
    assert "description" not in tool(functools.partial(rows, {})).output_schema


def test_unsupported_signatures_are_refused_clearly() -> None:
    def star(*values: int) -> int:
        """Doc."""
        return 0

    with pytest.raises(ToolValidationError, match=r"\*values is not supported"):
        tool(star)

    def unresolved(x: NoSuchType) -> int:  # type: ignore[name-defined]  # noqa: F821
        """Doc."""
        return 0

    with pytest.raises(ToolValidationError, match="cannot resolve the annotation 'NoSuchType'"):
        FunctionTool(unresolved)

    class Opaque:
        pass

    def opaque(x: Opaque) -> int:
        """Doc."""
        return 0

    with pytest.raises(ToolValidationError, match=r"parameter 'x': its type .*Opaque has no JSON"):
        tool(opaque)


def test_strip_titles_keeps_real_title_properties_and_explicit_titles() -> None:
    schema = {
        "title": "Model",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "type": "string"},
            "name": {"title": "A custom title", "type": "string"},
        },
        "$defs": {"Inner": {"title": "Inner", "properties": {"title": {"type": "string"}}}},
        "default": {"title": "data, not a schema"},
    }
    out = strip_titles(schema)
    assert out["properties"]["title"] == {"type": "string"}
    assert out["properties"]["name"]["title"] == "A custom title"
    assert out["$defs"]["Inner"] == {"properties": {"title": {"type": "string"}}}
    assert out["default"] == {"title": "data, not a schema"}
    assert "title" not in out


# -- strict export -------------------------------------------------------------------------


def _strict(fn: Callable[..., Any]) -> dict[str, Any]:
    return tool(fn).to_openai(strict=True)["function"]  # type: ignore[no-any-return]


def _all_objects(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            found.append(schema)
        for value in schema.values():
            found += _all_objects(value)
    elif isinstance(schema, list):
        for value in schema:
            found += _all_objects(value)
    return found


def _check_strict_shape(function: dict[str, Any]) -> None:
    assert function["strict"] is True
    params = function["parameters"]
    assert "default" not in str(params)
    for obj in _all_objects(params):
        assert obj["additionalProperties"] is False
        assert sorted(obj["required"]) == sorted(obj["properties"])


def test_strict_optional_with_none_default_is_required_and_nullable() -> None:
    fn = _strict(f_opt_none)
    _check_strict_shape(fn)
    validator = jsonschema.Draft202012Validator(fn["parameters"])
    assert validator.is_valid({"name": None}) and not validator.is_valid({})


def test_strict_optional_without_default_stays_nullable() -> None:
    fn = _strict(f_opt_required)
    _check_strict_shape(fn)
    assert jsonschema.Draft202012Validator(fn["parameters"]).is_valid({"name": None})


def test_strict_non_none_default_becomes_nullable_and_null_means_the_default() -> None:
    fn = _strict(f_default)
    _check_strict_shape(fn)
    assert fn["parameters"]["properties"]["n"]["type"] == ["integer", "null"]
    assert tool(f_default).validate_args({"n": None}) == {"n": 3}


def test_strict_nested_model_sets_additional_properties_in_defs() -> None:
    fn = _strict(f_nested_model)
    _check_strict_shape(fn)
    defs = fn["parameters"]["$defs"]
    assert defs["Person"]["additionalProperties"] is False
    assert defs["Address"]["additionalProperties"] is False
    assert "nicknames" in defs["Person"]["required"]
    sample = {"person": {"name": "a", "address": {"street": "s", "city": "c"},
                         "nicknames": None}}
    jsonschema.validate(sample, fn["parameters"])
    assert tool(f_nested_model).validate_args(sample)["person"].nicknames == []


def test_strict_recursive_model() -> None:
    fn = _strict(f_recursive)
    _check_strict_shape(fn)
    jsonschema.validate({"tree": {"value": 1, "children": [{"value": 2, "children": None}]}},
                        fn["parameters"])


def test_strict_enum() -> None:
    fn = _strict(f_enum)
    _check_strict_shape(fn)
    v = jsonschema.Draft202012Validator(fn["parameters"])
    assert v.is_valid({"color": "red"}) and not v.is_valid({"color": "blue"})


def test_strict_refuses_dict_parameters() -> None:
    with pytest.raises(ToolValidationError, match="parameter 'scores' is a free-form object"):
        _strict(f_dict)
    assert tool(f_dict).to_openai()["function"]["parameters"]["properties"]["scores"]


def test_strict_refuses_any_parameters() -> None:
    with pytest.raises(ToolValidationError, match="parameter 'value' accepts Any"):
        _strict(f_any)


def test_strict_schema_of_a_hand_written_object() -> None:
    out = to_strict_schema(
        {"type": "object", "properties": {"a": {"type": "string", "default": "x"}}}, tool="t"
    )
    assert out == {
        "type": "object",
        "properties": {"a": {"type": ["string", "null"]}},
        "required": ["a"],
        "additionalProperties": False,
    }


def test_mcp_annotations_follow_the_category() -> None:
    read = to_mcp_annotations(category="read", effect_tags=(), idempotent=True, title="t")
    assert read["readOnlyHint"] and not read["destructiveHint"] and not read["openWorldHint"]
    write = to_mcp_annotations(category="write", effect_tags=("file_write",), idempotent=False,
                               title="t")
    assert not write["readOnlyHint"] and write["destructiveHint"]
    talk = to_mcp_annotations(category="communicate", effect_tags=(), idempotent=False,
                              title="t")
    assert talk["openWorldHint"] and not talk["destructiveHint"]
    http = to_mcp_annotations(category="read", effect_tags=("http",), idempotent=True,
                              title="t")
    assert http["openWorldHint"]


def test_registration_checks_report_every_problem() -> None:
    class Bad(Tool):
        name = "bad name!"
        description = ""
        category = "dangerous"
        permission = "auto"
        input_schema = {"type": "object", "properties": {"a": {"type": "string"}},
                        "required": ["a", "b"]}

        def run(self, x: str) -> str:
            return x

    with pytest.raises(ToolValidationError) as info:
        Bad().check_definition()
    problems = info.value.problems
    assert any("name 'bad name!'" in p for p in problems)
    assert any("description is empty" in p for p in problems)
    assert any("required parameter 'b' is not in properties" in p for p in problems)
    assert any("schema parameter 'a' is not in the function's signature" in p for p in problems)
    assert any("dangerous tool cannot have permission 'auto'" in p for p in problems)
    assert "'bad name!'" in str(info.value)


def test_missing_parameter_description_is_a_warning_or_an_error() -> None:
    def f(a: int) -> int:
        """Does things."""
        return a

    t = tool(f)
    with pytest.warns(ToolDefinitionWarning, match="parameter 'a' has no description"):
        notes = t.check_definition()
    assert len(notes) == 1
    with pytest.raises(ToolValidationError, match="parameter 'a' has no description"):
        t.check_definition(require_parameter_descriptions=True)


def test_explicit_input_schema_must_match_the_signature() -> None:
    def f(amount: float) -> str:
        """Convert."""
        return str(amount)

    t = tool(input_schema={"type": "object", "properties": {
        "amount": {"type": "number", "description": "How much"},
        "currency": {"type": "string", "description": "Which"},
    }})(f)
    with pytest.raises(ToolValidationError, match="'currency' is not in the function's signature"):
        t.check_definition()


@pytest.mark.parametrize("case_id", list(CASES))
def test_fast_path_schema_equals_the_model_schema(case_id: str) -> None:
    fn = CASES[case_id].fn
    fast = function_schema(fn)
    slow = function_schema(fn, _fast=False)
    assert fast.parameters == slow.parameters
    assert list(fast.parameters) == list(slow.parameters)
    assert fast.model.model_json_schema(by_alias=True)  # the lazy model builds


def test_fast_path_hands_out_independent_schemas() -> None:
    a, b = tool(f_list), tool(f_list)
    a.parameters["properties"]["items"]["items"]["extra"] = True
    assert "extra" not in b.parameters["properties"]["items"]["items"]
    assert "extra" not in tool(f_list).parameters["properties"]["items"]["items"]


def test_run_context_under_type_checking_is_recognised_without_resolving() -> None:
    source = (
        "from __future__ import annotations\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from jianmu.runtime.context import RunContext\n"
        "def f(query: str, ctx: RunContext, other: jianmu_ctx.RunContext | None = None,\n"
        "      token: Injected[str] = '') -> str:\n"
        "    '''Doc.'''\n"
        "    return query\n"
    )
    namespace: dict[str, Any] = {}
    exec(compile(source, "<test>", "exec", dont_inherit=True), namespace)
    t = tool(namespace["f"])
    assert set(t.parameters["properties"]) == {"query"}
    assert set(t.function_schema.injected_names) == {"ctx", "other", "token"}


def test_docstring_format_can_be_forced_and_is_checked() -> None:
    def f(a: int) -> int:
        """Summary.

        Args:
            a: The a.
        """
        return a

    assert tool(docstring_format="google")(f).parameters["properties"]["a"]["description"] == (
        "The a.")
    assert "description" not in tool(docstring_format="sphinx")(f).parameters["properties"]["a"]
    with pytest.raises(ValueError, match="docstring_format 'markdown' is not known"):
        tool(docstring_format="markdown")(f)


def test_description_sections_never_leak() -> None:
    def f(a: int) -> int:
        """Summary line.

        Free text: kept.

        Example:
            f(1)

        Args:
            a: The a.
        """
        return a

    assert tool(f).description == "Summary line.\n\nFree text: kept."


def test_strict_schema_of_no_parameters_and_of_an_empty_model() -> None:
    empty = {"type": "object", "properties": {}, "required": [], "additionalProperties": False}
    assert to_strict_schema({"type": "object", "properties": {}}, tool="t") == empty
    assert to_strict_schema({"type": "object"}, tool="t") == empty
    nested = to_strict_schema(
        {"type": "object", "properties": {"opts": {"type": "object", "properties": {}}},
         "required": ["opts"]},
        tool="t",
    )
    assert nested["properties"]["opts"] == empty
    with pytest.raises(ToolValidationError, match="parameter 'free' is a free-form object"):
        to_strict_schema(
            {"type": "object", "properties": {"free": {"type": "object"}}}, tool="t"
        )


def test_strict_export_drops_the_schema_dialect_of_a_tool_without_parameters() -> None:
    # an MCP server's no-argument tool (the filesystem server's list_allowed_directories)
    sent = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "properties": {}}
    assert to_strict_schema(sent, tool="list_allowed_directories") == {
        "type": "object", "properties": {}, "required": [], "additionalProperties": False,
    }


def test_string_annotations_resolve_in_the_functions_own_globals() -> None:
    # a string annotation means what its own module says (here Path names int), however many
    # functions of other modules used the same text before
    namespace: dict[str, Any] = {"Path": int}
    exec("def f(a: 'Path', b: 'list[Path]', c: 'Path | None' = None) -> 'str':\n"
         "    return ''", namespace)
    props = function_schema(namespace["f"]).parameters["properties"]
    assert props["a"]["type"] == "integer"
    assert props["b"]["items"]["type"] == "integer"
    assert {"type": "integer"} in props["c"]["anyOf"]
    here = function_schema(lambda a: a)  # no annotations at all: still a schema
    assert "a" in here.parameters["properties"]


def test_a_parameter_whose_type_has_no_schema_is_named_with_its_type_and_a_way_out() -> None:
    # the message was pydantic's ("Cannot generate a JsonSchema for
    # core_schema.IsInstanceSchema (...)", then a pydantic URL): it named no parameter
    import socket

    def send(city: str, connection: socket.socket, retries: int = 1) -> str:
        """Send it."""
        return city

    with pytest.raises(ToolValidationError) as caught:
        tool(send)
    (problem,) = caught.value.problems
    assert problem.startswith("parameter 'connection': its type socket.socket has no JSON Schema")
    assert "functools.partial" in problem
    assert "errors.pydantic.dev" not in str(caught.value) and "core_schema" not in problem
