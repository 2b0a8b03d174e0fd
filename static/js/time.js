// Show the browser's local time next to every UTC time (<time datetime=…><span class="local">).
(function () {
  "use strict";
  function fill(root) {
    var nodes = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < nodes.length; i++) {
      var el = nodes[i];
      var d = new Date(el.getAttribute("datetime"));
      if (isNaN(d.getTime())) continue;
      var local = el.querySelector(".local") || (el.nextElementSibling && el.nextElementSibling.classList.contains("local") ? el.nextElementSibling : null);
      if (!local) continue;
      local.textContent = " (" + d.toLocaleString([], { month: "short", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" }) + " local)";
    }
  }
  document.addEventListener("DOMContentLoaded", function () { fill(document); });
  document.addEventListener("htmx:afterSettle", function (ev) { fill(ev.target); });
})();
