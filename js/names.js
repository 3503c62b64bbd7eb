// The names shared by both bundles (the notebook widget and the HTML report): the synced
// traits, as in fxviz/widgets/_graph_view.py, and the version of the data contract
// made by fxviz/render/_payload.py. Change a name here and in Python together.
export const T = {
  dot: "dot",
  mode: "mode",
  selected: "selected",
  states: "node_states",
  units: "units",
  unitsDelta: "units_delta",
  inspector: "inspector",
  rows: "rows",
  rowsTotal: "rows_total",
  status: "status",
  error: "error",
  renderMs: "render_ms",
  layoutTimeout: "layout_timeout_s",
  index: "index",
  contract: "contract",
  pressed: "pressed",
};

// fxviz.render._payload.PAYLOAD_VERSION: the page refuses data of another version.
export const PAYLOAD_VERSION = 3;

// Node states become CSS classes with this prefix (fxviz-current, fxviz-done...).
export const STATE_PREFIX = "fxviz-";
