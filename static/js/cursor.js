// Keyboard arrows move the time cursor (← → one minute, with Shift ten minutes).
// The step links are plain hrefs with hx-get, so this only clicks them.
(function () {
  "use strict";
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var tag = (ev.target && ev.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (ev.target && ev.target.isContentEditable)) return;
    var step = null;
    if (ev.key === "ArrowLeft") step = ev.shiftKey ? "-10m" : "-1m";
    if (ev.key === "ArrowRight") step = ev.shiftKey ? "+10m" : "+1m";
    if (!step) return;
    var link = document.querySelector('.cursor-bar a.step[data-step="' + step + '"]');
    if (link) { ev.preventDefault(); link.click(); }
  });
})();
