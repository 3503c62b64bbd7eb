// The linked table: one row a node, the first `limit` of them (the page contract's
// table_rows), rebuilt only where rows changed (a step adds a row or two; rebuilding a
// thousand rows each step held the page for a tenth of a second).
import { h } from "./dom.js";

export function renderTable(box, shown, { rows, total, selected, limit, onSelect }) {
  if (!rows.length) {
    box.replaceChildren();
    Object.assign(shown, { columns: "", keys: [], body: null, hint: null });
    return;
  }
  const columns = Object.keys(rows[0]);
  const shownRows = rows.length > limit ? rows.slice(0, limit) : rows;
  const count = Math.max(total || 0, rows.length); // the kernel sends only the shown rows
  const makeRow = (row) =>
    h("tr", { class: row.name === selected ? "fxviz-row-selected" : "", "data-name": row.name, onclick: () => onSelect(row.name) },
      ...columns.map((c) => h("td", {}, row[c] == null ? "" : String(row[c]))));
  if (shown.columns !== columns.join("\n") || !shown.body) {
    Object.assign(shown, { columns: columns.join("\n"), keys: [], body: h("tbody"), hint: h("div", { class: "fxviz-hint" }) });
    box.replaceChildren(h("table", {}, h("thead", {}, h("tr", {}, ...columns.map((c) => h("th", {}, c)))), shown.body));
  }
  const { keys, body, hint } = shown;
  shownRows.forEach((row, i) => {
    const key = JSON.stringify(row);
    if (keys[i] === key) return;
    if (i < body.children.length) body.children[i].replaceWith(makeRow(row));
    else body.append(makeRow(row));
    keys[i] = key;
  });
  while (body.children.length > shownRows.length) body.lastChild.remove();
  keys.length = shownRows.length;
  hint.textContent = `… ${count - shownRows.length} more rows: search finds any node`;
  if (count > shownRows.length) box.append(hint);
  else hint.remove();
}

// Mark the selected row; a newly selected one is scrolled into the table's own scroll box
// (the nearest edge), never the page: scrollIntoView would scroll the notebook too.
export function markTableSelection(box, selected) {
  let row = null;
  for (const tr of box.querySelectorAll("tr[data-name]")) {
    const on = tr.dataset.name === selected;
    tr.classList.toggle("fxviz-row-selected", on);
    if (on) row = tr;
  }
  if (!row || box.dataset.scrolledTo === selected || !box.clientHeight) return; // hidden: later
  box.dataset.scrolledTo = selected;
  const b = box.getBoundingClientRect(), r = row.getBoundingClientRect();
  const top = b.top + box.clientTop, bottom = top + box.clientHeight;
  if (r.top < top) box.scrollTop -= top - r.top;
  else if (r.bottom > bottom) box.scrollTop += Math.min(r.bottom - bottom, r.top - top);
}
