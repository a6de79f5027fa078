"""`.ragignore`: what in the raw folder is not a document.

A documents folder often holds files about the documents rather than documents: a README for
whoever drops files there, a manifest or catalogue listing every file, exports, drafts. Indexed,
a catalogue row ("file: layout-parser-paper.pdf; what it is: LayoutParser paper …") outranks the
document it describes for questions about that document, and gets quoted instead of it
(bench/README.md, "Files that are not documents"). The folder's own `.ragignore` names them
with the gitignore patterns operators already know, so the rule travels with the folder and its
changes wake the raw-folder sensor like any other change. A folder one may not write to (a
read-only share) takes its rules from a file elsewhere: `RAG_IGNORE_FILE`.

The subset of gitignore supported: blank lines and `#` comments; `!` re-includes what an earlier
pattern excluded (not inside an excluded folder, which is never entered, as in git); a trailing
`/` matches folders only; a pattern with a `/` elsewhere is anchored at the raw folder, one
without matches a name at any depth; `*`, `?` and `[...]` match within one path segment, a `**`
segment any number of segments. Matching is case-sensitive. An ignored file is not scanned,
parsed or quarantined: it is counted under `ignored` in the raw_documents metadata, and a file
that becomes ignored leaves the index on the next run like a deleted one.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

IGNORE_FILE = ".ragignore"
# Office's owner file beside a document someone has open (~$budget.xlsx, 162 bytes naming who):
# no document, and gone once the document is closed. Counted as ignored, never quarantined.
OFFICE_LOCK_PREFIX = "~$"


def churn_only(name: str) -> bool:
    """A name whose coming and going is no change to the documents: hidden files (an editor's
    swap file, .DS_Store; the folder's own .ragignore excepted) and Office's lock files."""
    return (name.startswith(".") and name != IGNORE_FILE) or name.startswith(OFFICE_LOCK_PREFIX)


@dataclass(frozen=True)
class IgnoreRule:
    segments: tuple[str, ...]
    anchored: bool
    folders_only: bool
    negated: bool

    @classmethod
    def parse(cls, line: str) -> "IgnoreRule | None":
        """One line of a .ragignore; None for blanks and comments."""
        pattern = line.rstrip("\n").rstrip()
        if not pattern or pattern.startswith("#"):
            return None
        negated = pattern.startswith("!")
        pattern = pattern[1:] if negated else pattern
        folders_only = pattern.endswith("/")
        pattern = pattern.rstrip("/")
        anchored = "/" in pattern
        segments = tuple(s for s in pattern.lstrip("/").split("/") if s)
        return cls(segments, anchored, folders_only, negated) if segments else None

    def matches(self, relative: str, is_folder: bool) -> bool:
        if self.folders_only and not is_folder:
            return False
        parts = relative.split("/")
        if not self.anchored:
            return fnmatchcase(parts[-1], self.segments[0])
        return _match_segments(self.segments, tuple(parts))


def _match_segments(pattern: tuple[str, ...], parts: tuple[str, ...]) -> bool:
    if not pattern:
        return not parts
    if pattern[0] == "**":  # any number of segments; at the end at least one ("drafts/**" is what is inside)
        first = 1 if len(pattern) == 1 else 0
        return any(_match_segments(pattern[1:], parts[i:]) for i in range(first, len(parts) + 1))
    return bool(parts) and fnmatchcase(parts[0], pattern[0]) and _match_segments(pattern[1:], parts[1:])


@dataclass(frozen=True)
class IgnoreRules:
    rules: tuple[IgnoreRule, ...] = ()

    @classmethod
    def parse(cls, text: str) -> "IgnoreRules":
        return cls(tuple(rule for line in text.splitlines() if (rule := IgnoreRule.parse(line)) is not None))

    @classmethod
    def of_folder(cls, raw_dir: Path, extra: Path | None = None) -> "IgnoreRules":
        """The raw folder's `.ragignore` (if any), then `extra` (RAG_IGNORE_FILE: rules kept
        outside a folder one may not write to; its lines come last, so they win). An unreadable
        or non-UTF-8 file, or an `extra` that does not exist, is an error: indexing files the
        operator meant to exclude is worse than a failed scan that says why."""
        own = raw_dir / IGNORE_FILE
        paths = ([own] if own.is_file() else []) + ([extra] if extra is not None else [])
        rules: tuple[IgnoreRule, ...] = ()
        for path in paths:
            try:
                rules += cls.parse(path.read_text(encoding="utf-8")).rules
            except (OSError, UnicodeDecodeError) as exc:
                raise ValueError(f"cannot read the ignore rules {path}: {exc}") from exc
        return cls(rules)

    def ignores(self, relative: str, is_folder: bool = False) -> bool:
        """Whether the path (relative to the raw folder, `/`-separated) is excluded: the last
        matching rule decides."""
        ignored = False
        for rule in self.rules:
            if rule.negated == ignored and rule.matches(relative, is_folder):
                ignored = not rule.negated
        return ignored
