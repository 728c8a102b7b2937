"""The page's end of a worksheet's charts: new data goes straight to the vega view already drawn.

A worksheet chart is a cell output (:func:`capnb.notebook.chart_html`): a saved notebook and an
exported report draw it with no kernel. Updating that output on every change costs the page a new
output (JupyterLab renders the HTML, runs its script and lays the notebook out again) even when the
script then only gives the kept vega view its new data. In a live notebook the worksheet instead
sends the new data to the page in a widget message (:class:`LiveCharts`): the page gives it to the
kept view (``view.data``, ``view.signal``) and vega redraws the SVG in place, with no output
touched. The outputs are brought up to date once the controls have rested (``rest_s``), so a saved
or exported notebook shows what the page shows.

The channel is used only once the page has said it is there (its first message), and only for a
chart drawn again in the shape of the drawing the page holds; the page answers with the keys it
could not draw (no kept view: a reloaded page, another front end), which are then drawn as outputs.
Headless (nbclient, a script, the tests) no page ever answers, and every chart is an output.
"""

from __future__ import annotations

import anywidget

__all__ = ["LiveCharts"]

_ESM = """
function apply(update) {
  const kept = (window.capnbViews || {})[update.key];
  if (!kept || kept.shape !== update.shape || !kept.element.isConnected) return false;
  for (const [name, digest] of Object.entries(update.digests)) {
    if (kept.digests[name] === digest) continue;  // the view holds these values already
    if (!(name in update.tables)) return false;
  }
  // the page's one way for a kept view to take new data (capnb.notebook's bundle defines it)
  window.capnbGive(kept, update.digests, update.signals, (name) => JSON.parse(update.tables[name]));
  return true;
}

export default {
  initialize({ model }) {
    model.on("msg:custom", (message) => {
      const missed = [];
      for (const update of message.updates || []) {
        let drawn = false;
        try { drawn = apply(update); } catch (error) { drawn = false; }
        if (!drawn) missed.push(update.key);
      }
      if (missed.length) model.send({ missed });
    });
    model.send({ here: true });
  },
  render({ el }) { el.style.display = "none"; },
};
"""


class LiveCharts(anywidget.AnyWidget):
    """A worksheet's channel to the page's kept vega views (see the module).

    ``here`` turns true when a page has loaded the channel; ``on_missed(keys)`` is called with the
    keys of the charts a page could not draw from a message.
    """

    _esm = _ESM

    def __init__(self, on_missed=None):
        super().__init__()
        self.here = False
        self.on_missed = on_missed
        self.on_msg(self._received)

    def _received(self, _widget, content, _buffers) -> None:
        if content.get("here"):
            self.here = True
        missed = content.get("missed")
        if missed and self.on_missed is not None:
            self.on_missed(list(missed))

    def draw(self, updates: list[dict]) -> None:
        """Send new data for kept views (:func:`capnb.notebook.chart_update` messages), at once."""
        if updates:
            self.send({"updates": updates})
