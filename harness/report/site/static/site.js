// mibench site: the filters of the overview and the regressions page (no library, no
// request). A form `[data-filter-for=ID]` filters the `[data-row]` elements of #ID: a
// select `[data-filter=NAME]` keeps the rows whose `data-NAME` equals its value, the text
// box `[data-filter=text]` those whose `data-text` holds every word typed. The choice is
// kept in the address (#verdict=pass&text=extend) so a filtered view can be linked.
(function () {
  "use strict";
  document.querySelectorAll("form[data-filter-for]").forEach(function (form) {
    var table = document.getElementById(form.getAttribute("data-filter-for"));
    var rows = Array.prototype.slice.call(table.querySelectorAll("[data-row]"));
    var fields = Array.prototype.slice.call(form.querySelectorAll("[data-filter]"));
    var count = form.querySelector("[data-count]");
    function apply() {
      var shown = 0, state = [];
      fields.forEach(function (f) {
        if (f.value) state.push(f.getAttribute("data-filter") + "=" + encodeURIComponent(f.value));
      });
      rows.forEach(function (row) {
        var ok = fields.every(function (f) {
          var name = f.getAttribute("data-filter"), value = f.value.trim().toLowerCase();
          if (!value) return true;
          if (name === "text") {
            var text = row.getAttribute("data-text") || "";
            return value.split(/\s+/).every(function (w) { return text.indexOf(w) >= 0; });
          }
          return (row.getAttribute("data-" + name) || "").toLowerCase() === value;
        });
        row.hidden = !ok;
        if (ok) shown += 1;
      });
      count.textContent = shown + " of " + rows.length;
      if (history.replaceState && state.length) history.replaceState(null, "", "#" + state.join("&"));
      else if (history.replaceState && location.hash.indexOf("=") >= 0) history.replaceState(null, "", location.pathname + location.search);
    }
    location.hash.replace(/^#/, "").split("&").forEach(function (pair) {
      var kv = pair.split("="), f = form.querySelector('[data-filter="' + kv[0] + '"]');
      if (f && kv.length === 2) f.value = decodeURIComponent(kv[1]);
    });
    fields.forEach(function (f) { f.addEventListener("input", apply); f.addEventListener("change", apply); });
    apply();
  });
})();
