// Small DOM helpers shared by the widget's parts.

// An element with attributes ("class", "on<event>" handlers, others as attributes) and children.
export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value);
  }
  for (const child of children) node.append(child);
  return node;
}

// Call `then` once `el` has a non-zero size (at once if it has one).
export function whenSized(el, then) {
  if (el.clientWidth > 0 && el.clientHeight > 0) { then(); return; }
  const observer = new ResizeObserver(() => {
    if (el.clientWidth > 0 && el.clientHeight > 0) { observer.disconnect(); then(); }
  });
  observer.observe(el);
}
