// The home page's question table: filter its rows by topic, difficulty, proof status and evidence level.
// The rows carry data-topic, data-difficulty, data-status and data-levels, the levels a page has separated by
// spaces (written by verify/website/study.py).
(function () {
  "use strict";

  function setup() {
    var table = document.getElementById("question-index");
    if (!table) return;
    var selects = {
      topic: document.getElementById("qi-topic"),
      difficulty: document.getElementById("qi-difficulty"),
      status: document.getElementById("qi-status"),
      levels: document.getElementById("qi-levels"),
    };
    // A row matches a level it has among others; every other filter matches one value.
    function has(row, key, wanted) {
      if (key === "levels") return (row.dataset.levels || "").split(" ").indexOf(wanted) >= 0;
      return row.dataset[key] === wanted;
    }
    var count = document.getElementById("qi-count");
    var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr"));

    function apply(event) {
      var shown = 0;
      rows.forEach(function (row) {
        var match = Object.keys(selects).every(function (key) {
          var wanted = selects[key] ? selects[key].value : "";
          return !wanted || has(row, key, wanted);
        });
        row.hidden = !match;
        if (match) shown += 1;
      });
      if (count) count.textContent = shown + " of " + rows.length + " questions";
      if (!event) return;
      // Keep the filter in the address, so a filtered list can be bookmarked or shared.
      var params = new URLSearchParams();
      Object.keys(selects).forEach(function (key) {
        if (selects[key] && selects[key].value) params.set(key, selects[key].value);
      });
      var query = params.toString();
      history.replaceState(null, "", query ? "#" + query : location.pathname + location.search);
    }

    function fromAddress() {
      var wanted = new URLSearchParams(location.hash.slice(1));
      if (!Object.keys(selects).some(function (key) { return wanted.has(key); })) return false;
      Object.keys(selects).forEach(function (key) {
        if (selects[key]) selects[key].value = wanted.get(key) || "";
      });
      return true;
    }

    Object.keys(selects).forEach(function (key) {
      if (selects[key]) selects[key].addEventListener("change", apply);
    });
    window.addEventListener("hashchange", function () {
      if (fromAddress()) apply();
    });
    fromAddress();
    apply();
    showRecords(table);
  }

  // Each question's record from the mock interview (its localStorage, docs/javascripts/mock-interview.js).
  var INTERVALS = [1, 2, 4, 8, 16];
  function showRecords(table) {
    var state = null;
    try {
      state = JSON.parse(window.localStorage.getItem("accelerate-interview-study-v1") || "null");
    } catch (error) {
      return;
    }
    var cards = (state && state.cards) || {};
    var next = ((state && state.session) || 0) + 1;
    table.querySelectorAll("td.qi-history").forEach(function (cell) {
      var card = cards[cell.dataset.question];
      if (!card) return;
      var wait = card.last + INTERVALS[card.box - 1] - next;
      var due = card.grade === "missed" || wait <= 0 ? "due now" : "due in " + (wait + 1) + " interviews";
      cell.textContent = "seen " + card.seen + "×, last " + card.grade + (card.date ? " (" + card.date + ")" : "") + "; " + due;
      cell.dataset.grade = card.grade;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
