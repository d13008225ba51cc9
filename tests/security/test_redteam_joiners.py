"""Zero-width joiners, shown: escaped where they hide, kept where a script needs them.

The CLI and the studio write every character a terminal or a page would hide as an escape, so
``pay\\u200dpal`` never passes for ``paypal`` before a person deciding on a call. That escaped
the joiners that scripts and emoji are written with too: a family emoji read
``👩\\u200d👩\\u200d👧`` and ordinary Persian (its non-joiner, in most sentences) or a Hindi
conjunct read as escapes everywhere. The joiners are now kept where IDNA's CONTEXTJ rules and
emoji sequences put them, and still escaped anywhere else; the page (``panels.js``) and the
server (``jianmu/_text.py``) apply one rule, checked here side by side.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from jianmu._text import json_visible, visible

PANELS = Path(__file__).resolve().parents[2] / "jianmu" / "studio" / "static" / "panels.js"

KEPT = [
    "👩\u200d👩\u200d👧",  # a family
    "❤\ufe0f\u200d🔥",  # a pictograph, its presentation selector, the joiner, a pictograph
    "🏳\ufe0f\u200d🌈",
    "می\u200cخواهم",  # Persian: the non-joiner between two letters
    "क्\u200dष",  # Devanagari: a joiner after a virama
    "क्\u200c",
]
ESCAPED = [
    "pay\u200dpal",  # would read as "paypal"
    "write\u200d_file",
    "drop_table\u200d",
    "\u200d",
    "a\u200cb",  # Latin letters join nothing
    "👩\u200da",  # a pictograph and a letter
    "\u200d👩",
    "ب\u200c ",  # a joining letter, then a space
    "x\ufe0f\u200d👩",
]


@pytest.mark.parametrize("text", KEPT)
def test_a_joiner_a_script_needs_is_shown_as_it_is(text: str) -> None:
    assert visible(text) == text and json_visible(text) == text


@pytest.mark.parametrize("text", ESCAPED)
def test_a_joiner_anywhere_else_is_an_escape(text: str) -> None:
    shown = visible(text)
    assert "\u200d" not in shown and "\u200c" not in shown, shown
    assert "\\u200d" in shown or "\\u200c" in shown, shown


def _mixes(count: int) -> list[str]:
    """Seeded strings of joiners among letters, pictographs, viramas and selectors."""
    pieces = ["a", "_", " ", "ب", "م", "क", "\u094d", "👩", "🔥", "❤", "\ufe0f", "\u200b",
              "\u200c", "\u200d", "\u202e", "1", "۳"]
    rng = random.Random(7)
    return ["".join(rng.choice(pieces) for _ in range(rng.randint(1, 8))) for _ in range(count)]


def test_the_page_and_the_server_show_the_same_text() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the page's rule is checked where it is")
    cases = [*KEPT, *ESCAPED, *_mixes(400)]
    script = (f"import {{ visible }} from {json.dumps(PANELS.as_uri())};\n"
              "const cases = JSON.parse(process.argv[1]);\n"
              "console.log(JSON.stringify(cases.map(visible)));\n")
    done = subprocess.run([node, "--input-type=module", "-e", script, json.dumps(cases)],
                          capture_output=True, text=True, timeout=120, check=True)
    page = json.loads(done.stdout)
    assert [c for c, shown in zip(cases, page, strict=True) if shown != visible(c)] == []
