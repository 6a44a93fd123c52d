// The status page's script (fleetcache/api/status_html.py serves it inline, allowed by its
// hash in the page's Content-Security-Policy). No build step, no library.
//
// * On the sign-in page (Keystone, no token yet): keeps the pasted token in a cookie that
//   only the status paths read (SameSite=Strict, the page's own path), then reloads.
// * On the status page: polls the progress feed every few seconds and updates each job's
//   progress in place; when a job changes state or a new one appears, reloads the page so
//   that the server renders the hosts x images matrix again. Text is only ever set through
//   textContent: nothing the feed returns is parsed as HTML.
(function () {
  "use strict";
  var root = document.documentElement;
  var cookie = root.getAttribute("data-token-cookie");
  var cookiePath = root.getAttribute("data-cookie-path");
  var secure = window.location.protocol === "https:" ? "; Secure" : "";

  function setToken(value, maxAge) {
    document.cookie = cookie + "=" + encodeURIComponent(value) + "; Path=" + cookiePath +
      "; SameSite=Strict" + secure + (maxAge === undefined ? "" : "; Max-Age=" + maxAge);
  }

  var form = document.getElementById("token-form");
  if (form) {
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var token = document.getElementById("token").value.trim();
      if (token) {
        setToken(token);
        window.location.reload();
      }
    });
    return;
  }
  var forget = document.getElementById("forget-token");
  if (forget) {
    forget.addEventListener("click", function (event) {
      event.preventDefault();
      setToken("", 0);
      window.location.reload();
    });
  }

  var feed = root.getAttribute("data-progress-url");
  var interval = Number(root.getAttribute("data-poll-ms")) || 2000;
  var status = document.getElementById("poll-status");
  if (!feed) {
    return;
  }

  function rowOf(jobId) {
    var rows = document.querySelectorAll("tr[data-job]");
    for (var i = 0; i < rows.length; i++) {
      if (rows[i].getAttribute("data-job") === jobId) {
        return rows[i];
      }
    }
    return null;
  }

  function setText(row, name, text) {
    var cell = row.querySelector("[data-field='" + name + "']");
    if (cell) {
      cell.textContent = text;
    }
  }

  function update(job) {
    var row = rowOf(job.id);
    if (row === null) {
      return true;  // a job the page does not show yet
    }
    var total = job.total_hosts, done = job.hosts_reported;
    setText(row, "progress-text", done + "/" + total + " hosts");
    var bar = row.querySelector("progress");
    if (bar) {
      bar.max = Math.max(total, 1);
      bar.value = done;
    }
    var counts = [];
    Object.keys(job.counts).forEach(function (state) {
      if (job.counts[state]) {
        counts.push(job.counts[state] + " " + state);
      }
    });
    setText(row, "counts", counts.join(", "));
    return row.getAttribute("data-state") !== job.state;
  }

  function poll() {
    window.fetch(feed, {credentials: "same-origin", headers: {"Accept": "application/json"}})
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.json();
      })
      .then(function (body) {
        var changed = false;
        body.jobs.forEach(function (job) {
          changed = update(job) || changed;
        });
        if (status) {
          status.textContent = "updated " + new Date().toLocaleTimeString();
        }
        if (changed) {
          window.location.reload();
          return;
        }
        window.setTimeout(poll, interval);
      })
      .catch(function (error) {
        if (status) {
          status.textContent = "progress feed: " + error.message;
        }
        window.setTimeout(poll, interval * 2);
      });
  }

  window.setTimeout(poll, interval);
}());
