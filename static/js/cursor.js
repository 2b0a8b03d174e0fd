// Keyboard for the time cursor: ← → one minute, Shift+← → ten minutes, [ ] previous/next change.
// Every target is a plain link with an identical hx-get, so this only clicks it (htmx swaps #page
// and pushes the URL; without htmx the browser follows the href).
(function () {
  "use strict";
  var KEYS = {
    ArrowLeft: function (ev) { return '.cursor-bar a.step[data-step="' + (ev.shiftKey ? "-10m" : "-1m") + '"]'; },
    ArrowRight: function (ev) { return '.cursor-bar a.step[data-step="' + (ev.shiftKey ? "+10m" : "+1m") + '"]'; },
    "[": function () { return "#cursor-prev-change"; },
    "]": function () { return "#cursor-next-change"; }
  };
  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.altKey || ev.ctrlKey || ev.metaKey) return;
    var tag = (ev.target && ev.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (ev.target && ev.target.isContentEditable)) return;
    var pick = KEYS[ev.key];
    if (!pick) return;
    var link = document.querySelector(pick(ev));
    if (link) { ev.preventDefault(); link.click(); }
  });
})();
