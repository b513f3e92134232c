// prun review: follow the run. Every few seconds ask the server for the page's version (the
// run's last event); when it changed, reload, unless the person is typing a note. The page's
// own token (never a cookie) goes with each request, in a header only this page can add.
(function () {
  "use strict";
  var body = document.body;
  var version = body.getAttribute("data-version");
  var meta = document.querySelector("meta[name=prun-token]");
  var token = meta ? meta.getAttribute("content") : "";
  function typing() {
    var notes = document.querySelectorAll("form.decide input[name=note]");
    for (var i = 0; i < notes.length; i++) {
      if (notes[i].value || notes[i] === document.activeElement) { return true; }
    }
    return false;
  }
  function tick() {
    fetch("/version", { credentials: "omit", cache: "no-store", headers: { "X-Prun-Token": token } })
      .then(function (r) { return r.ok ? r.json() : null; })
      .then(function (v) {
        if (v && String(v.version) !== version && !typing()) { location.reload(); return; }
        setTimeout(tick, v && v.live ? 2000 : 5000);
      })
      .catch(function () { setTimeout(tick, 5000); });
  }
  setTimeout(tick, 2000);
})();
