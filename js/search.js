// Search over every node of the graph (run or not): its name, target and module path.
// `index` rows are [name, target, module] from Python; without one, the drawn titles.
// Drawn nodes no index name reaches (a joint graph draws the forward and the backward
// `relu`: one name, two nodes `fw_relu` and `bw_relu`) are searchable by their title.

export function searchIndex(index, titles, unit = (name) => name) {
  const named = new Set(); // one name, one entry (both passes' rows name the same unit)
  const rows = (Array.isArray(index) ? index : []).filter(([name]) => !named.has(name) && named.add(name));
  const reached = new Set(rows.map(([name]) => unit(name)));
  for (const title of titles) if (!reached.has(title)) rows.push([title, "", ""]);
  return rows.map(([name, target, module]) => ({ name, text: `${name} ${target ?? ""} ${module ?? ""}`.toLowerCase() }));
}

// The names matching `query` (case-insensitive, every word must appear), in graph order.
export function findNodes(entries, query) {
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return [];
  return entries.filter((e) => words.every((w) => e.text.includes(w))).map((e) => e.name);
}
