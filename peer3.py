from pydantic_ai import Agent
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.messages import ModelResponse, ToolCallPart, TextPart
n = [0]
def f(messages, info):
    n[0] += 1
    if n[0] == 1:
        return ModelResponse(parts=[ToolCallPart("boom", {"n": 1}), ToolCallPart("ok", {"n": "notint"}), ToolCallPart("nosuch", {}), ToolCallPart("ok", {"n": 2})])
    return ModelResponse(parts=[TextPart("done")])
a = Agent(FunctionModel(f))
@a.tool_plain
def boom(n: int) -> str:
    raise ValueError("bad")
@a.tool_plain
def ok(n: int) -> str:
    return "ok"
try:
    r = a.run_sync("q")
    print("pydantic-ai", r.usage())
except Exception as e:
    print("pyd", type(e).__name__, e)
