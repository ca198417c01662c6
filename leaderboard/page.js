// Sorting of the leaderboard tables and linking rows to their chart marks. The page is complete without it.
"use strict";

function cellValue(row, index, numeric) {
  const cell = row.cells[index];
  const raw = cell.dataset.value !== undefined ? cell.dataset.value : cell.textContent.trim().toLowerCase();
  if (raw === "") return null;
  return numeric ? Number(raw) : raw;
}

function compareValues(a, b, ascending) {
  // Rows without a value go last whatever the direction.
  if (a === null || b === null) return (a === null) - (b === null);
  const order = a < b ? -1 : a > b ? 1 : 0;
  return ascending ? order : -order;
}

function sortTable(table, th) {
  const index = th.cellIndex;
  const numeric = th.dataset.sort === "num";
  const ascending = th.getAttribute("aria-sort") === "descending";
  for (const other of table.tHead.rows[0].cells) other.removeAttribute("aria-sort");
  th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  // Each body (reproduced runs, reported scores) is sorted on its own: the two are never interleaved.
  for (const body of table.tBodies) {
    const rows = Array.from(body.querySelectorAll("tr.entry"));
    const keyed = rows.map((row, i) => ({ row, i, value: cellValue(row, index, numeric) }));
    keyed.sort((x, y) => compareValues(x.value, y.value, ascending) || x.i - y.i);
    for (const { row } of keyed) body.appendChild(row);
  }
}

function highlight(entry, on) {
  for (const mark of document.querySelectorAll("g.mark")) {
    mark.classList.toggle("hl", on && mark.dataset.entry === entry);
    mark.classList.toggle("dim", on && mark.dataset.entry !== entry);
  }
}

for (const table of document.querySelectorAll("table.board")) {
  for (const th of table.tHead.rows[0].cells) {
    const button = th.querySelector("button");
    if (th.dataset.sort && button) button.addEventListener("click", () => sortTable(table, th));
  }
  for (const row of table.querySelectorAll("tr.entry")) {
    row.addEventListener("mouseenter", () => highlight(row.dataset.entry, true));
    row.addEventListener("mouseleave", () => highlight(row.dataset.entry, false));
  }
}
