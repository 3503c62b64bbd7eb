// Search over every node of the graph (run or not): its name, target and module path.
// `index` rows are [name, target, module] from Python; without one, the drawn titles.

export function searchIndex(index, titles) {
  const rows = Array.isArray(index) && index.length ? index : [...titles].map((t) => [t, "", ""]);
  return rows.map(([name, target, module]) => ({ name, text: `${name} ${target ?? ""} ${module ?? ""}`.toLowerCase() }));
}

// The names matching `query` (case-insensitive, every word must appear), in graph order.
export function findNodes(entries, query) {
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
  if (!words.length) return [];
  return entries.filter((e) => words.every((w) => e.text.includes(w))).map((e) => e.name);
}
