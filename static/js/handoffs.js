// Copy-link buttons (the incident URL with its cursor) and the print button on handoff pages.
(function () {
  "use strict";
  document.addEventListener("click", function (ev) {
    var btn = ev.target.closest && ev.target.closest("button.copy-link[data-url]");
    if (btn) {
      var url = new URL(btn.getAttribute("data-url"), window.location.origin).href;
      var done = function () { btn.textContent = "copied"; setTimeout(function () { btn.textContent = "copy link"; }, 1500); };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(url).then(done, function () { window.prompt("Copy this link:", url); });
      } else {
        window.prompt("Copy this link:", url);
      }
      return;
    }
    if (ev.target.closest && ev.target.closest("button.print-page")) window.print();
  });
})();
