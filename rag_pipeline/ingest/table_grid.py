"""Table rows laid out by their cells' edges (Word 97-2003 binary, RTF, Word 2003 XML): merged
cells put back on the table's column grid."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RowLayout:
    """A table row's cells as laid out: cell i spans [edges[i], edges[i+1]) (twips, or grid
    columns); a cell that continues a vertical merge from the row above, or a horizontal merge
    from its left."""

    edges: tuple[int, ...]
    continues_above: tuple[bool, ...]
    continues_left: tuple[bool, ...]


def grid_rows(rows: list[tuple[list[str], RowLayout]]) -> list[list[str]]:
    """Rows on the table's column grid (every row's cell edges together): a cell spanning
    several grid columns fills the first and leaves the rest empty, a cell continuing a merge
    takes the text of the cell it continues (a group label repeated in each row, as for .docx)."""
    grid = sorted({edge for _, row in rows for edge in row.edges})
    if len(grid) < 2 or any(len(row.edges) != len(cells) + 1 for cells, row in rows):
        return [cells for cells, _ in rows]  # no usable layout: the cells as they come
    out: list[list[str]] = []
    for cells, row in rows:
        line = [""] * (len(grid) - 1)
        for i, text in enumerate(cells):
            column = grid.index(row.edges[i])
            if row.continues_above[i] and out:
                text = text or out[-1][column]
            elif row.continues_left[i] and column:
                continue
            line[column] = text
        out.append(line)
    return out
