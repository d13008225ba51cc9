"""A ``tool_policy`` whose deny a later allow silently replaced: a YAML merge key (``<<``)
was let through the check for keys written twice, so ``<<: {delete_file: deny}`` followed by
``delete_file: allow`` loaded as allow. A merge key is refused, naming file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from jianmu.config import load_config
from jianmu.errors import ConfigError


@pytest.mark.parametrize("text", [
    "guard:\n  tool_policy:\n    <<: {delete_file: deny}\n    delete_file: allow\n",
    "guard:\n  tool_policy:\n    <<: [{delete_file: deny}]\n    delete_file: allow\n",
    "guard:\n  tool_policy: {<<: {delete_file: deny}, delete_file: allow}\n",
])
def test_a_merge_key_is_refused_at_its_line(tmp_path: Path, text: str) -> None:
    path = tmp_path / "jianmu.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    message = str(caught.value)
    assert f"{path}:3:" in message or f"{path}:2:" in message, message
    assert "<<" in message and "merge" in message


def test_a_quoted_key_spelt_like_one_is_a_key(tmp_path: Path) -> None:
    path = tmp_path / "jianmu.yaml"
    path.write_text("llm:\n  extra_headers:\n    '<<': x\n")
    try:
        load_config(path)
    except ConfigError as exc:  # refused for what it is, not as a merge
        assert "merge" not in str(exc)
