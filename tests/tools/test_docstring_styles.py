"""Docstrings as other projects write them: each parameter's description reaches the schema.
Each of these lost it: NumPy's ``x, y : int`` (one entry for two names) and its ``Other
Parameters``; Google's ``Keyword Args:`` (Google's style guide and napoleon's); and a
napoleon type with a Sphinx role, ``y (:obj:`int`, optional): ...``."""

from __future__ import annotations

from jianmu.tools import tool


def _described(fn: object) -> dict[str, str | None]:
    made = tool(fn)  # type: ignore[call-overload]
    return {k: v.get("description") for k, v in made.parameters["properties"].items()}


def test_numpy_names_sharing_an_entry_and_other_parameters() -> None:
    def move(x: int, y: int, speed: float = 1.0) -> str:
        """Move to a point.

        Parameters
        ----------
        x, y : int
            The point.

        Other Parameters
        ----------------
        speed : float
            How fast.
        """
        return f"{x} {y} {speed}"

    assert _described(move) == {"x": "The point.", "y": "The point.", "speed": "How fast."}


def test_google_keyword_args_and_a_type_with_a_sphinx_role() -> None:
    def find(query: str, limit: int = 10, exact: bool = False) -> str:
        """Find records.

        Args:
            query (:obj:`str`): what to look for.

        Keyword Args:
            limit (:obj:`int`, optional): at most this many. Defaults to 10.
            exact: match whole words only.
        """
        return query

    made = tool(find)
    assert made.description == "Find records."
    assert _described(find) == {"query": "what to look for.",
                                "limit": "at most this many. Defaults to 10.",
                                "exact": "match whole words only."}


def test_a_role_in_a_description_reads_as_its_text() -> None:
    def ping(host: str) -> str:
        """Ping a host (see :func:`socket.gethostbyname`).

        :param host: a name :class:`~socket.socket` can reach.
        """
        return host

    made = tool(ping)
    assert made.description == "Ping a host (see socket.gethostbyname)."
    assert _described(ping) == {"host": "a name socket.socket can reach."}
