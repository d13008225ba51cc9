"""`redact_text` masks URLs' passwords in log records and sub-agents' errors, whose text may be
as long as a tool's output. Its URL pattern had an unbounded scheme, so every word boundary of
``a.a.a...`` was scanned to the end of the text for a ``://``: 40 KB took 1.7 s, 1 MB would take
about twenty minutes. The scheme is bounded now, and the scan is linear."""

from __future__ import annotations

import pytest

from jianmu._secrets import redact_text


@pytest.mark.timeout(60)  # linear: well under a second; the old pattern: about twenty minutes
@pytest.mark.parametrize("piece", ["a.", "a-", "a+"])
def test_a_megabyte_of_scheme_like_words_is_read_once(piece: str) -> None:
    text = piece * 500_000 + " https://user:hunter22@example.com/x"
    cleaned = redact_text(text)
    assert cleaned.endswith("https://user:***@example.com/x")
    assert "hunter22" not in cleaned


def test_a_long_registered_looking_scheme_is_still_read() -> None:
    scheme = "x-" + "a" * 60  # 62 characters: within the bound
    assert redact_text(f"{scheme}://u:secretpw@h") == f"{scheme}://u:***@h"
