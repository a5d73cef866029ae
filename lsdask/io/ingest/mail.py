"""Cleaning mail and news posts before they are cut into words.

:func:`clean_mail` (``strip_mail=True``, ``lsdask ingest ... --strip-mail``)
keeps what the author of a post wrote, and drops what would otherwise become
the most frequent "words" of a corpus of mail or news (``edu``, ``com``,
``writes``, ``article``) or junk topics (``ax``, ``max``, ``giz``):

* the header block at the top: lines ``Name: value`` (and their indented
  continuation lines) up to the first blank line, when every line before it
  is such a line;
* quoted lines of the message replied to: lines whose first non-blank
  character is ``>`` or ``|`` (``> text``, ``|> text``, ``>> text``);
* attribution lines: ``In article <id@host>, name writes:``, and any line
  ending in ``writes:``, ``wrote:``, ``says:`` or ``said:``;
* the signature: everything after the last line that is exactly ``--`` or
  ``-- `` (the signature delimiter);
* encoded data: uuencoded blocks (``begin 644 name`` to ``end``) and any line
  that is, leading and trailing blanks aside, one run of 40 or more
  characters without a space (base64, PGP signatures, the uuencoded images
  that 20 Newsgroups posts carry); a line that also holds words is kept whole,
  a long link in a sentence included;
* e-mail addresses and message ids (``name@host.domain``).

The functions are pure: text in, text out.
"""

from __future__ import annotations

import re

__all__ = ["clean_mail", "is_attribution", "is_quoted", "strip_header_block", "strip_signature"]

_HEADER = re.compile(r"[!-9;-~]+:(?:\s|$)")  # RFC 5322 field name: printable ASCII, no colon
_CONTINUATION = re.compile(r"[ \t]")
_QUOTED = re.compile(r"\s*[>|]")
_ATTRIBUTION = re.compile(r"\s*In article\b|.*\b(?:writes|wrote|says|said)\s*:\s*$", re.IGNORECASE)
_UUENCODE_BEGIN = re.compile(r"begin [0-7]{3,4} \S")
_LONG_UNSPACED = re.compile(r"\S{40,}")  # a whole line (stripped), by fullmatch
_EMAIL = re.compile(r"<?[\w.+=!%-]+@[\w-]+(?:\.[\w-]+)+>?")
_SIGNATURE_DELIMITERS = ("--", "-- ")


def strip_header_block(lines: list[str]) -> list[str]:
    """``lines`` without the header block at the top (see the module), or
    unchanged when the first lines are not all header lines."""
    if not lines or not _HEADER.match(lines[0]):
        return lines
    for i, line in enumerate(lines):
        if not line.strip():
            return lines[i + 1 :]
        if not (_HEADER.match(line) or _CONTINUATION.match(line)):
            return lines
    return []  # headers only


def strip_signature(lines: list[str]) -> list[str]:
    """``lines`` up to the last signature delimiter (``--`` or ``-- ``), if any."""
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] in _SIGNATURE_DELIMITERS:
            return lines[:i]
    return lines


def is_quoted(line: str) -> bool:
    """Whether ``line`` quotes the message replied to (``> ...``, ``|> ...``)."""
    return _QUOTED.match(line) is not None


def is_attribution(line: str) -> bool:
    """Whether ``line`` introduces a quotation (``In article <...>, x writes:``)."""
    return _ATTRIBUTION.match(line) is not None


def _without_encoded(lines: list[str]) -> list[str]:
    """``lines`` without uuencoded blocks and the lines that are one run of 40 or
    more characters without a space (see the module)."""
    kept: list[str] = []
    in_block = False
    for line in lines:
        if in_block:
            in_block = line.strip() != "end"
        elif _UUENCODE_BEGIN.match(line):
            in_block = True
        elif not _LONG_UNSPACED.fullmatch(line.strip()):
            kept.append(line)
    return kept


def clean_mail(text: str) -> str:
    """The text of a mail or news post without headers, quotations,
    attributions, signature, encoded data and addresses (see the module).

    Examples
    --------
    >>> post = (
    ...     "From: ann@x.edu\\nSubject: Re: cars\\n\\nIn article <1@y.com>, bob@y.com writes:\\n"
    ...     "> Fast cars.\\nSlow trucks. Mail ann@x.edu\\n-- \\nAnn, Dept of Physics\\n"
    ... )
    >>> clean_mail(post)
    'Slow trucks. Mail'
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = strip_signature(strip_header_block(lines))
    lines = [line for line in lines if not (is_quoted(line) or is_attribution(line))]
    return _EMAIL.sub(" ", "\n".join(_without_encoded(lines))).strip()
