// eddy console: refreshes a page's live part (#live) by asking the server for it
// (?fragment=1) every data-poll milliseconds while the page is visible, and applies the
// overview's search as one types. Without this script the pages work the same, only
// by reloading.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var busy = false;
  function refresh() {
    if (!live || busy || document.hidden) return;
    busy = true;
    var u = new URL(location.href);
    u.searchParams.set("fragment", "1");
    fetch(u, { credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html !== null) {
          live.innerHTML = html;
          live.dataset.refreshed = String(Date.now());
        }
      })
      .catch(function () { /* the next poll tries again */ })
      .finally(function () { busy = false; });
  }
  if (live && live.dataset.poll) {
    setInterval(refresh, Math.max(500, Number(live.dataset.poll) || 2000));
  }
  var form = document.querySelector("form.filter");
  if (form && live) {
    var timer = 0;
    form.addEventListener("input", function () {
      clearTimeout(timer);
      timer = setTimeout(function () {
        var u = new URL(location.href);
        new FormData(form).forEach(function (v, k) { if (v) u.searchParams.set(k, v); else u.searchParams.delete(k); });
        u.searchParams.delete("page");
        history.replaceState(null, "", u);
        refresh();
      }, 250);
    });
  }
})();
