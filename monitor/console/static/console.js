// Live updates of the console's pages: every 1.5 s, fetch the page's JSON
// (?live=1) and put each region the server rendered (autoescaped) in place.
// No build step, no library; the Content-Security-Policy allows this file only.
(function () {
  "use strict";
  var live = document.body.getAttribute("data-live");
  if (!live) {
    return;
  }
  var EVERY = 1500;
  var status = document.getElementById("live-status");

  function say(text) {
    if (status) {
      status.textContent = text;
    }
  }

  function apply(data) {
    if (data.error) {
      say("not updated: " + data.error);
      return;
    }
    var regions = data.regions || {};
    Object.keys(regions).forEach(function (id) {
      var region = document.getElementById(id);
      if (region) {
        region.innerHTML = regions[id];
      }
    });
    say("live: updated " + data.at);
  }

  function tick() {
    if (document.hidden) {
      window.setTimeout(tick, EVERY);
      return;
    }
    fetch(live, {credentials: "same-origin", cache: "no-store", headers: {"Accept": "application/json"}})
      .then(function (response) {
        if (response.status === 401) {
          window.location.reload();  // the session ended: the login page
          return null;
        }
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (data) {
        if (data) {
          apply(data);
        }
      })
      .catch(function (error) {
        say("not updated: " + error.message);
      })
      .then(function () {
        window.setTimeout(tick, EVERY);
      });
  }

  window.setTimeout(tick, EVERY);
})();
