/* E31 Network: the little script the pages need (no inline script: the Content-Security-Policy forbids it).
   - the live log: new lines are appended by htmx (hx-swap="beforeend"); the view follows the end only
     while the reader is at the end, and nothing else on the page is touched (focus, selection kept);
   - htmx swaps the answers of 400/413/422 too (a form shown again with its errors);
   - the submit form: files dropped on the drop zone, and the upload's progress;
   - every polled part keeps the reader's focus and the <details> they opened across a swap, whatever it
     replaced: the element focused before is found again in the new content (by id, else by its href,
     name and value or text within the nearest element with an id) and focused;
   - the job page's clocks tick between polls, its log's search box highlights matches (also in lines
     appended later), and a #L120 address scrolls the log to line 120. */
(function () {
  "use strict";
  // Whether the log's box was scrolled to its end before the swap (then it follows the new end).
  var following = new WeakMap();
  function atEnd(box) { return box.scrollHeight - box.scrollTop - box.clientHeight < 8; }

  // Focus and open <details> across swaps. htmx keeps the focus only on an element with an id in the
  // main swap's content; a link without one (the log's "full log" link, swapped out of band each
  // second) would leave the focus on <body>.
  var focusedBefore = null;
  var openBefore = [];

  function focusKey(el) {
    if (!el || el === document.body || el === document.documentElement) return null;
    var scope = el.parentElement && el.parentElement.closest("[id]");
    return {
      el: el, id: el.id, tag: el.tagName, scope: scope ? scope.id : "",
      href: el.getAttribute("href"), name: el.getAttribute("name"), value: el.getAttribute("value"),
      text: (el.textContent || "").trim().slice(0, 120),
      selection: "selectionStart" in el ? [el.selectionStart, el.selectionEnd] : null,
    };
  }

  function sameAs(key, el) {
    if (key.href !== null || el.getAttribute("href") !== null) return el.getAttribute("href") === key.href;
    if (key.name !== null || el.getAttribute("name") !== null) {
      return el.getAttribute("name") === key.name && el.getAttribute("value") === key.value;
    }
    return (el.textContent || "").trim().slice(0, 120) === key.text;
  }

  function findAgain(key) {
    if (key.id) return document.getElementById(key.id);
    var root = (key.scope && document.getElementById(key.scope)) || document;
    var found = Array.prototype.filter.call(root.getElementsByTagName(key.tag), function (el) { return sameAs(key, el); });
    return found.length ? found[0] : null;
  }

  function beforePoll() {
    var active = document.activeElement;
    if (!focusedBefore || focusedBefore.el !== active) focusedBefore = focusKey(active);
    openBefore = Array.prototype.map.call(document.querySelectorAll("details[open][id]"), function (d) { return d.id; });
  }

  function afterPoll() {
    openBefore.forEach(function (id) {
      var d = document.getElementById(id);
      if (d && !d.open) d.open = true;
    });
    var key = focusedBefore;
    if (!key || key.el.isConnected) return; // nothing focused, or the swap left it in place
    var active = document.activeElement;
    if (active && active !== document.body && active !== document.documentElement) return;
    var again = findAgain(key);
    if (!again) return;
    again.focus({preventScroll: true});
    if (key.selection && "setSelectionRange" in again) {
      try { again.setSelectionRange(key.selection[0], key.selection[1]); } catch (e) { /* not a text field */ }
    }
    focusedBefore = focusKey(again);
  }

  document.addEventListener("htmx:beforeSwap", beforePoll);
  document.addEventListener("htmx:afterSwap", afterPoll);
  document.addEventListener("htmx:oobAfterSwap", afterPoll);
  document.addEventListener("htmx:afterSettle", afterPoll);

  document.addEventListener("htmx:beforeSwap", function (event) {
    var status = event.detail.xhr.status;
    if (status === 400 || status === 413 || status === 422 || status === 429) {
      event.detail.shouldSwap = true;
      event.detail.isError = false;
    }
    var target = event.detail.target;
    if (target && target.id === "log") {
      var box = target.closest(".log-scroll");
      if (box) following.set(box, atEnd(box));
    }
  });

  document.addEventListener("htmx:afterSwap", function (event) {
    var target = event.detail.target;
    if (target && target.id === "log") {
      var box = target.closest(".log-scroll");
      if (box && following.get(box)) box.scrollTop = box.scrollHeight;
    }
  });


  // The bar follows the upload of its own form, and only it: htmx's htmx:xhr:progress also fires for
  // the answer's download and for any other request (the estimate), whose few hundred bytes would
  // overwrite the upload's figures.
  document.addEventListener("htmx:beforeSend", function (event) {
    var bar = document.getElementById("upload-progress");
    if (!bar || bar.closest("form") !== event.detail.elt) return;
    event.detail.xhr.upload.addEventListener("progress", function (progress) {
      if (!progress.lengthComputable) return;
      bar.hidden = false;
      bar.max = progress.total;
      bar.value = progress.loaded;
      var label = document.getElementById("upload-progress-text");
      if (label) label.textContent = Math.round(100 * progress.loaded / progress.total) + "% sent";
    });
  });

  function dropZones() {
    document.querySelectorAll("[data-drop-zone]").forEach(function (zoneEl) {
      if (zoneEl.dataset.ready) return;
      zoneEl.dataset.ready = "1";
      var input = zoneEl.querySelector("input[type=file]");
      var list = zoneEl.querySelector("[data-drop-list]");
      function show() {
        if (!list || !input) return;
        list.textContent = Array.prototype.map.call(input.files, function (f) { return f.name; }).join(", ");
      }
      ["dragenter", "dragover"].forEach(function (name) {
        zoneEl.addEventListener(name, function (e) { e.preventDefault(); zoneEl.classList.add("over"); });
      });
      ["dragleave", "drop"].forEach(function (name) {
        zoneEl.addEventListener(name, function () { zoneEl.classList.remove("over"); });
      });
      zoneEl.addEventListener("drop", function (e) {
        e.preventDefault();
        if (!input || !e.dataTransfer) return;
        var all = new DataTransfer();
        Array.prototype.forEach.call(input.files, function (f) { all.items.add(f); });
        Array.prototype.forEach.call(e.dataTransfer.files, function (f) { all.items.add(f); });
        input.files = all.files;
        show();
      });
      if (input) input.addEventListener("change", show);
    });
  }

  // Clocks: [data-tick=up|down] with data-seconds at render; they count from when they appeared, so the
  // viewer's own clock being off does not matter. The server writes the first value with
  // core.formats.duration, so a tick writes exactly what it would: rounded half up to the second, days
  // from 24 h, "< 1 s" for a positive span under a second, a negative one as 0 s.
  var tickBase = new WeakMap();
  function two(n) { return (n < 10 ? "0" : "") + n; }
  function duration(seconds) {
    if (!Number.isFinite(seconds)) return "\u2014";  // an em dash, as the server writes no value
    if (seconds > 0 && seconds < 1) return "< 1 s";
    var whole = Math.max(0, Math.round(seconds));  // Math.round takes a half up, as the server does
    if (whole < 60) return whole + " s";
    var minutes = Math.floor(whole / 60);
    if (minutes < 60) return minutes + " m " + two(whole % 60) + " s";
    var hours = Math.floor(minutes / 60);
    if (hours < 24) return hours + " h " + two(minutes % 60) + " m";
    return Math.floor(hours / 24).toLocaleString("en-US") + " d " + (hours % 24) + " h";
  }
  // For the browser tests, which compare it with core.formats.duration value by value.
  window.e31 = {duration: duration};
  function tick() {
    var now = performance.now();
    document.querySelectorAll("[data-tick]").forEach(function (el) {
      if (!tickBase.has(el)) tickBase.set(el, now);
      var start = parseFloat(el.getAttribute("data-seconds")) || 0;
      var passed = (now - tickBase.get(el)) / 1000;
      var value = el.getAttribute("data-tick") === "down" ? Math.max(0, start - passed) : start + passed;
      if (el.tagName === "PROGRESS") el.value = Math.min(value, el.max);
      else el.textContent = duration(value);
    });
  }

  // The log's search: matches highlighted with the CSS Custom Highlight API (the log's text is not
  // touched, so a copy or a selection stays as it was); next and previous; lines appended are searched too.
  function logSearch() {
    var bar = document.querySelector(".log-search");
    var log = document.getElementById("log");
    if (!bar || !log || bar.dataset.ready) return;
    bar.dataset.ready = "1";
    bar.hidden = false;
    var input = document.getElementById("log-search");
    var count = document.getElementById("log-search-count");
    var highlights = window.CSS && CSS.highlights && window.Highlight ? CSS.highlights : null;
    var matches = [];
    var current = -1;
    var timer = null;

    function find() {
      var query = input.value.toLowerCase();
      matches = [];
      if (!query) return;
      var walker = document.createTreeWalker(log, NodeFilter.SHOW_TEXT);
      for (var node = walker.nextNode(); node; node = walker.nextNode()) {
        var text = node.data.toLowerCase();
        for (var at = text.indexOf(query); at !== -1; at = text.indexOf(query, at + query.length)) {
          var range = document.createRange();
          range.setStart(node, at);
          range.setEnd(node, at + query.length);
          matches.push(range);
        }
      }
    }
    function show(scroll) {
      if (highlights) {
        highlights.set("log-match", new Highlight(...matches));
        highlights.set("log-current", current >= 0 ? new Highlight(matches[current]) : new Highlight());
      }
      count.textContent = !input.value ? "" : matches.length ? (current + 1) + " of " + matches.length : "no match";
      if (scroll && current >= 0) {
        var line = matches[current].startContainer.parentElement.closest(".l");
        if (line) line.scrollIntoView({block: "center"});
      }
    }
    function run() {
      find();
      current = matches.length ? 0 : -1;
      show(true);
    }
    function step(by) {
      if (!matches.length) return;
      current = (current + by + matches.length) % matches.length;
      show(true);
    }
    input.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 120); });
    input.addEventListener("keydown", function (e) {
      if (e.key === "Enter") { e.preventDefault(); step(e.shiftKey ? -1 : 1); }
      if (e.key === "Escape") { input.value = ""; run(); }
    });
    document.getElementById("log-search-next").addEventListener("click", function () { step(1); });
    document.getElementById("log-search-prev").addEventListener("click", function () { step(-1); });
    document.addEventListener("htmx:afterSwap", function (event) {
      if (event.detail.target !== log || !input.value) return;
      var before = current;
      find();  // the earlier matches keep their places: the lines were appended after them
      current = matches.length ? Math.max(before, 0) : -1;
      show(false);
    });
  }

  // The log opens at its end, or at the line its address names (#L120), marked by :target.
  function openLog() {
    document.querySelectorAll(".log-scroll").forEach(function (box) { box.scrollTop = box.scrollHeight; });
    var wanted = /^#L(\d+)$/.exec(location.hash);
    if (!wanted) return;
    var line = document.getElementById("L" + wanted[1]);
    if (line) {
      // Centred, with lines around it; again after the browser's own jump to the fragment, which aligns it on top.
      line.scrollIntoView({block: "center"});
      window.addEventListener("load", function () { line.scrollIntoView({block: "center"}); }, {once: true});
      return;
    }
    var note = document.getElementById("log-tail-note");
    if (note) note.textContent = "Line " + wanted[1] + " is before the end of the log shown here: the full log has it.";
  }

  document.addEventListener("DOMContentLoaded", function () {
    dropZones();
    openLog();
    logSearch();
    tick();
    setInterval(tick, 1000);
  });
  document.addEventListener("htmx:afterSettle", dropZones);
  document.addEventListener("htmx:afterSettle", tick);
})();
