// The mock interview: questions one at a time with a countdown, the 30-second answer on demand,
// a self-grade, and Leitner boxes kept in localStorage so missed questions come back sooner.
// The questions come from assets/study/questions.json, written by the site build (verify/website/study.py).
(function () {
  "use strict";

  var STORE = "accelerate-interview-study-v1";
  var INTERVALS = [1, 2, 4, 8, 16]; // interviews before a question in box 1..5 is due again
  var GRADES = [
    { id: "knew", label: "Knew it", key: "1", points: 1 },
    { id: "partly", label: "Partly", key: "2", points: 0.5 },
    { id: "missed", label: "Missed", key: "3", points: 0 },
  ];

  // --- storage: {session, cards: {id: {box, last, grade, seen}}, current, last} ---------------
  var memory = null; // used when localStorage is unavailable (private windows, file://)
  function load() {
    try {
      var text = window.localStorage.getItem(STORE);
      if (text) return normalise(JSON.parse(text));
    } catch (error) {
      if (memory) return memory;
    }
    return memory || normalise({});
  }
  // Whatever was saved (by an older version of this page, or edited by hand) comes back in the shape the
  // page draws: anything malformed is dropped rather than allowed to break the page.
  function normalise(state) {
    function isObject(value) {
      return !!value && typeof value === "object" && !Array.isArray(value);
    }
    function isCount(value) {
      return typeof value === "number" && isFinite(value) && value >= 0;
    }
    function isGrade(value) {
      return GRADES.some(function (g) { return g.id === value; });
    }
    if (!isObject(state)) state = {};
    if (!isCount(state.session)) state.session = 0;
    var cards = isObject(state.cards) ? state.cards : {};
    state.cards = {};
    Object.keys(cards).forEach(function (id) {
      var card = cards[id];
      if (isObject(card) && card.box >= 1 && card.box <= INTERVALS.length && isCount(card.last) && isGrade(card.grade))
        state.cards[id] = card;
    });
    var last = state.last;
    if (!isObject(last) || !Array.isArray(last.results) || !isCount(last.asked)) delete state.last;
    else last.results = last.results.filter(function (r) { return isObject(r) && typeof r.id === "string" && isGrade(r.grade); });
    var current = state.current;
    if (!isObject(current) || !Array.isArray(current.queue) || !isCount(current.index) || !isObject(current.grades) ||
        !isCount(current.seconds) || !isCount(current.session)) delete state.current;
    if (state.undo && (!isObject(state.undo) || !isObject(state.undo.cards))) delete state.undo;
    if (state.setup && !isObject(state.setup)) delete state.setup;
    return state;
  }
  // Drops every question the site no longer has (a page renamed or removed since the progress was saved);
  // returns how many different questions went.
  function prune(state, byId) {
    var gone = {};
    function known(id) {
      if (byId[id]) return true;
      gone[id] = true;
      return false;
    }
    Object.keys(state.cards).forEach(function (id) {
      if (!known(id)) delete state.cards[id];
    });
    if (state.last) {
      var before = state.last.results.length;
      state.last.results = state.last.results.filter(function (r) { return known(r.id); });
      state.last.asked = Math.max(state.last.results.length, state.last.asked - (before - state.last.results.length));
      if (!state.last.results.length) delete state.last;
    }
    var current = state.current;
    if (current) {
      var index = current.queue.slice(0, current.index).filter(function (id) { return byId[id]; }).length;
      current.queue = current.queue.filter(known);
      current.index = index;
      Object.keys(current.grades).forEach(function (id) {
        if (!known(id)) delete current.grades[id];
      });
      if (!current.queue.length) delete state.current;
    }
    if (state.undo) {
      var undo = state.undo;
      var stale = Object.keys(undo.cards).filter(function (id) { return !known(id); }).length;
      ((undo.last && undo.last.results) || []).forEach(function (r) { if (!known(r.id)) stale += 1; });
      ((undo.current && undo.current.queue) || []).forEach(function (id) { if (!known(id)) stale += 1; });
      if (stale) delete state.undo; // an undo that would bring the old questions back
    }
    return Object.keys(gone).length;
  }
  function skippedNote(count) {
    return count + (count === 1 ? " question from an older version of the site was skipped." :
      " questions from an older version of the site were skipped.");
  }
  function save(state) {
    memory = state;
    try {
      window.localStorage.setItem(STORE, JSON.stringify(state));
    } catch (error) {
      /* progress then lasts as long as the page */
    }
  }

  // --- Leitner boxes -----------------------------------------------------------------------------
  function isDue(card, session) {
    return session - card.last >= INTERVALS[card.box - 1];
  }
  // Lower comes first: missed and due, partly and due, never seen, known and due, then not yet due.
  function priority(question, state, session) {
    var card = state.cards[question.id];
    if (!card) return [2, 0];
    if (isDue(card, session)) {
      var rank = card.grade === "missed" ? 0 : card.grade === "partly" ? 1 : 3;
      return [rank, card.box];
    }
    return [4, card.last + INTERVALS[card.box - 1] - session];
  }
  function pick(candidates, state, session, count) {
    var shuffled = candidates.slice();
    for (var i = shuffled.length - 1; i > 0; i--) {
      var j = Math.floor(Math.random() * (i + 1));
      var swap = shuffled[i];
      shuffled[i] = shuffled[j];
      shuffled[j] = swap;
    }
    var keyed = shuffled.map(function (q, index) {
      return { q: q, key: priority(q, state, session).concat([index]) };
    });
    keyed.sort(function (a, b) {
      for (var k = 0; k < a.key.length; k++) if (a.key[k] !== b.key[k]) return a.key[k] - b.key[k];
      return 0;
    });
    return keyed.slice(0, count).map(function (item) {
      return item.q.id;
    });
  }
  function grade(state, id, gradeId, session) {
    var card = state.cards[id] || { box: 1, seen: 0 };
    if (gradeId === "knew") card.box = Math.min(INTERVALS.length, card.box + 1);
    else if (gradeId === "partly") card.box = Math.max(1, card.box - 1);
    else card.box = 1;
    card.grade = gradeId;
    card.last = session;
    card.date = localDate(new Date());
    card.seen = (card.seen || 0) + 1;
    state.cards[id] = card;
  }

  // --- DOM helpers -------------------------------------------------------------------------------
  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (name === "text") node.textContent = value;
      else if (name === "html") node.innerHTML = value;
      else if (name.slice(0, 2) === "on") node.addEventListener(name.slice(2), value);
      else if (value !== false && value != null) node.setAttribute(name, value === true ? "" : value);
    });
    (function add(children) {
      children.forEach(function (child) {
        if (child == null || child === false) return;
        if (Array.isArray(child)) return add(child);
        node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
      });
    })(Array.prototype.slice.call(arguments, 2));
    return node;
  }
  function siteUrl(path) {
    var base = ".";
    var config = document.getElementById("__config");
    if (config) {
      try {
        base = JSON.parse(config.textContent).base || ".";
      } catch (error) {
        /* keep "." */
      }
    }
    return new URL(base.replace(/\/$/, "") + "/" + path, window.location.href).href;
  }
  // The reader's own calendar day (toISOString() would give the UTC day, a day off in Asia).
  function localDate(date) {
    return date.getFullYear() + "-" + String(date.getMonth() + 1).padStart(2, "0") + "-" + String(date.getDate()).padStart(2, "0");
  }
  function isDueOrMissed(card, next) {
    return !!card && (card.grade === "missed" || isDue(card, next));
  }
  function clock(seconds) {
    var s = Math.max(0, Math.ceil(seconds));
    return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
  }
  function percent(points, count) {
    return count ? Math.round((100 * points) / count) + "%" : "–";
  }

  // --- the page ----------------------------------------------------------------------------------
  function Interview(root, data) {
    this.root = root;
    this.questions = data.questions;
    this.byId = {};
    this.questions.forEach(function (q) {
      this.byId[q.id] = q;
    }, this);
    this.timer = null;
    this.quiet = null; // {x, y, until}: where a grade was tapped, and until when a second tap there is ignored
    this.onKey = this.onKey.bind(this);
    document.addEventListener("keydown", this.onKey);
    // Capture on window runs before mkdocs-material's own keydown listener and before any click handler.
    window.addEventListener("keydown", this.keepShortcutsOut.bind(this), true);
    window.addEventListener("click", this.swallowSecondTap.bind(this), true);
    var state = load();
    this.skipped = prune(state, this.byId);
    if (this.skipped) save(state);
    this.showSetup();
  }

  // The second tap of a double tap on a grade lands on whatever the next question put under the finger:
  // on a phone, the footer's "Next" link. A click at the same spot just after a grade does nothing.
  var QUIET_MS = 1000; // a double tap's second tap comes within ~300 ms; a slow phone may take longer to draw
  var SAME_SPOT_PX = 40;
  Interview.prototype.beQuietAt = function (event) {
    // (event times, not the clock: the time the page took to draw the next question does not count)
    this.quiet = event && event.detail ? { x: event.clientX, y: event.clientY, until: event.timeStamp + QUIET_MS } : null;
  };
  Interview.prototype.swallowSecondTap = function (event) {
    var quiet = this.quiet;
    this.quiet = null; // only the very next click can be the second tap
    if (!quiet || event.timeStamp >= quiet.until) return;
    if (Math.abs(event.clientX - quiet.x) > SAME_SPOT_PX || Math.abs(event.clientY - quiet.y) > SAME_SPOT_PX) return;
    event.preventDefault();
    event.stopPropagation();
  };

  // mkdocs-material goes to the next page on n or ".", the previous on p or ",": not in the middle of an interview.
  var PAGE_KEYS = ["n", "p", ".", ","];
  Interview.prototype.keepShortcutsOut = function (event) {
    if (!document.getElementById("mock-card") || PAGE_KEYS.indexOf(event.key) < 0) return;
    if (event.target && /^(INPUT|SELECT|TEXTAREA)$/.test(event.target.tagName)) return;
    event.stopPropagation();
  };

  Interview.prototype.clear = function () {
    if (this.timer) window.clearInterval(this.timer);
    this.timer = null;
    this.root.textContent = "";
  };

  Interview.prototype.topics = function () {
    var seen = {};
    return this.questions.filter(function (q) {
      if (seen[q.topic]) return false;
      return (seen[q.topic] = true);
    });
  };

  Interview.prototype.levels = function () {
    var order = ["junior", "mid", "senior", "unrated"];
    return order.filter(function (level) {
      return this.questions.some(function (q) {
        return q.difficulty === level;
      });
    }, this);
  };

  Interview.prototype.showSetup = function () {
    var self = this;
    var state = load();
    this.clear();
    var remembered = state.setup || {};
    var wantedTopic = new URLSearchParams(window.location.hash.slice(1)).get("topic");
    if (wantedTopic) history.replaceState(null, "", window.location.pathname + window.location.search); // once
    function isChosen(list, value) {
      return !list || list.indexOf(value) >= 0;
    }
    var topicBoxes = this.topics().map(function (q) {
      var total = self.questions.filter(function (x) {
        return x.topic === q.topic;
      }).length;
      var checked = wantedTopic ? wantedTopic.split(",").indexOf(q.topic) >= 0 : isChosen(remembered.topics, q.topic);
      return el("span", { class: "mock-choice" },
        el("label", {},
          el("input", { type: "checkbox", name: "topic", value: q.topic, checked: checked, onchange: update }),
          " " + q.topic_title + " (" + total + ")"),
        el("button", { type: "button", class: "mock-only", "data-only": q.topic, "aria-label": "Only " + q.topic_title,
          text: "only", onclick: function () {
            form.querySelectorAll("input[name=topic]").forEach(function (box) {
              box.checked = box.value === q.topic;
            });
            update();
          } }));
    });
    var levelBoxes = this.levels().map(function (level) {
      return el("label", { class: "mock-choice" },
        el("input", { type: "checkbox", name: "difficulty", value: level, checked: isChosen(remembered.levels, level), onchange: update }),
        " " + level);
    });
    var number = el("input", { type: "number", id: "mock-count", min: 1, value: remembered.count || 5, inputmode: "numeric", oninput: update });
    var wantedSeconds = String(remembered.seconds || 60);
    var seconds = el("select", { id: "mock-seconds" },
      [["30", "30 s"], ["60", "1 min"], ["90", "1 min 30"], ["120", "2 min"]].map(function (option) {
        return el("option", { value: option[0], text: option[1], selected: option[0] === wantedSeconds });
      }));
    var dueOnly = el("input", { type: "checkbox", id: "mock-due-only", checked: !!remembered.dueOnly, onchange: update });
    var matching = el("span", { id: "mock-matching", "aria-live": "polite" });
    var start = el("button", { type: "submit", class: "md-button md-button--primary", id: "mock-start", text: "Start the interview" });
    var form = el("form", { class: "mock-setup", id: "mock-setup" },
      el("fieldset", {}, el("legend", { text: "Topics" }), el("div", { class: "mock-choices" }, topicBoxes)),
      el("fieldset", {}, el("legend", { text: "Difficulty" }), el("div", { class: "mock-choices" }, levelBoxes)),
      el("div", { class: "mock-row" },
        el("label", { class: "mock-choice" }, dueOnly, " Only questions due again or missed last time")),
      el("div", { class: "mock-row" },
        el("label", {}, "Questions ", number), el("label", {}, "Time per question ", seconds), matching),
      el("div", { class: "mock-row" }, start));

    function chosen() {
      var topics = checked("topic");
      var levels = checked("difficulty");
      var cards = load().cards;
      var next = load().session + 1;
      return self.questions.filter(function (q) {
        return topics.indexOf(q.topic) >= 0 && levels.indexOf(q.difficulty) >= 0 &&
          (!dueOnly.checked || isDueOrMissed(cards[q.id], next));
      });
    }
    function checked(name) {
      return Array.prototype.slice.call(form.querySelectorAll("input[name=" + name + "]:checked")).map(function (i) {
        return i.value;
      });
    }
    function update() {
      var available = chosen().length;
      number.max = Math.max(1, available);
      matching.textContent = available + " question" + (available === 1 ? "" : "s") + " match";
      start.disabled = available === 0;
    }
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      var pool = chosen();
      var count = Math.max(1, Math.min(pool.length, parseInt(number.value, 10) || 1));
      var fresh = load();
      fresh.setup = { topics: checked("topic"), levels: checked("difficulty"), count: count,
        seconds: parseInt(seconds.value, 10) || 60, dueOnly: dueOnly.checked };
      // The session counter moves only when an interview is completed: an ended one does not count.
      fresh.current = {
        session: fresh.session + 1,
        queue: pick(pool, fresh, fresh.session + 1, count),
        index: 0,
        grades: {},
        seconds: parseInt(seconds.value, 10) || 60,
      };
      save(fresh);
      self.showQuestion();
    });

    var current = state.current;
    if (current && current.index < current.queue.length) {
      this.root.appendChild(el("div", { class: "admonition note mock-resume" },
        el("p", { text: "An interview is under way: question " + (current.index + 1) + " of " + current.queue.length + "." }),
        el("button", { type: "button", class: "md-button", id: "mock-resume", text: "Resume it", onclick: function () {
          self.showQuestion();
        } })));
    }
    if (this.skipped) this.root.appendChild(el("p", { class: "admonition note mock-skipped", id: "mock-skipped",
      text: skippedNote(this.skipped) + " Pages are renamed or removed as the site grows; the rest of your progress is kept." }));
    this.root.appendChild(form);
    if (state.last) this.root.appendChild(this.summary(state.last, "Your last interview", !!state.undo));
    this.root.appendChild(this.progress(state));
    this.root.appendChild(this.transfer());
    update();
  };

  Interview.prototype.showQuestion = function () {
    var self = this;
    var state = load();
    var current = state.current;
    if (!current || current.index >= current.queue.length) return this.finish();
    var question = this.byId[current.queue[current.index]];
    if (!question) {
      current.index += 1; // a question the site no longer has
      save(state);
      return this.showQuestion();
    }
    this.clear();
    var remaining = el("span", { class: "mock-clock", id: "mock-clock", role: "timer", "aria-live": "off", text: clock(current.seconds) });
    var bar = el("span", { class: "mock-bar-fill" });
    var answer = el("div", { class: "mock-answer", id: "mock-answer", tabindex: "-1", hidden: true },
      el("div", { class: "admonition success" },
        el("p", { class: "admonition-title", text: "30-second answer" }),
        el("div", { html: question.answer_html })),
      el("p", {}, el("a", { href: siteUrl(question.url), id: "mock-page-link", text: "Read the whole page: mechanism, proof, follow-ups →" })));
    var reveal = el("button", { type: "button", class: "md-button md-button--primary", id: "mock-reveal", text: "Reveal the 30-second answer" });
    var previous = current.index > 0 ? current.queue[current.index - 1] : null;
    var grades = el("div", { class: "mock-grades", id: "mock-grades", hidden: true },
      el("span", { text: "How did you do? " }),
      GRADES.map(function (g) {
        return el("button", { type: "button", class: "md-button mock-grade mock-grade--" + g.id, "data-grade": g.id,
          text: g.label, onclick: function (event) {
            if (event.detail > 1) return; // part of a double-click (on Reveal, just above): not a grade
            self.grade(g.id, event);
          } });
      }));
    reveal.addEventListener("click", function () { self.reveal(); });
    // "End the interview" sits in the card's top line, far from Reveal: a double-click on Reveal cannot reach it.
    var heading = el("h2", { class: "mock-question", id: "mock-question", tabindex: "-1", html: question.title_html || question.title });
    this.root.appendChild(el("section", { class: "mock-card", id: "mock-card", "data-question": question.id },
      el("p", { class: "mock-meta" },
        el("span", { id: "mock-position", text: "Question " + (current.index + 1) + " of " + current.queue.length }),
        el("span", { text: question.topic_title }),
        el("span", { class: "qi-level qi-level--" + question.difficulty, text: question.difficulty }),
        el("span", { class: "mock-meta-actions" },
          previous && current.grades[previous] ? el("button", { type: "button", class: "mock-link", id: "mock-undo",
            text: "Undo the last grade", onclick: function () { self.undo(); } }) : null,
          el("button", { type: "button", class: "mock-link", id: "mock-stop", text: "End the interview", onclick: function () {
            self.end();
          } }))),
      heading,
      el("div", { class: "mock-timer" }, remaining, el("span", { class: "mock-bar" }, bar)),
      el("div", { class: "mock-row" }, reveal),
      answer, grades));
    heading.focus({ preventScroll: true }); // screen readers hear the new question
    this.revealed = false;
    var started = Date.now();
    this.timer = window.setInterval(function () {
      var left = current.seconds - (Date.now() - started) / 1000;
      remaining.textContent = left > 0 ? clock(left) : "Time is up";
      bar.style.width = Math.max(0, (100 * left) / current.seconds) + "%";
      if (left <= 0) {
        remaining.classList.add("mock-clock--over");
        window.clearInterval(self.timer);
        self.timer = null;
      }
    }, 250);
  };

  Interview.prototype.reveal = function () {
    var answer = document.getElementById("mock-answer");
    if (!answer) return;
    this.quiet = null; // (revealed by the R key: the next click is a choice, not a second tap)
    answer.hidden = false;
    document.getElementById("mock-grades").hidden = false;
    var button = document.getElementById("mock-reveal");
    button.disabled = true; // stays where it was: a second click lands on nothing
    button.textContent = "Answer shown";
    if (this.timer) window.clearInterval(this.timer);
    this.timer = null;
    this.revealed = true;
    var grades = document.getElementById("mock-grades");
    if (grades.scrollIntoView) grades.scrollIntoView({ block: "nearest", behavior: "instant" });
    // Focus goes to the answer, which grades nothing: a stray Enter or space records no grade.
    answer.focus({ preventScroll: true });
  };

  Interview.prototype.grade = function (gradeId, event) {
    var state = load();
    var current = state.current;
    if (!current || !this.revealed) return;
    var id = current.queue[current.index];
    current.grades[id] = gradeId;
    current.index += 1;
    save(state);
    this.beQuietAt(event); // (a grade by keyboard has no spot)
    this.showQuestion();
  };

  // Back to the previous question, its grade forgotten (in an interview, or just after the last one).
  Interview.prototype.undo = function () {
    var state = load();
    if (!state.current && state.undo) {
      var before = state.undo;
      state.cards = before.cards;
      state.session = before.session;
      state.last = before.last;
      state.current = before.current;
      delete state.undo;
    }
    var current = state.current;
    if (!current || current.index === 0) return;
    current.index -= 1;
    delete current.grades[current.queue[current.index]];
    save(state);
    this.showQuestion();
  };

  // Ending early asks first, and the ended interview counts for nothing: no grade, no session, no summary.
  Interview.prototype.end = function () {
    if (!window.confirm("End this interview? Its grades will not be kept, and your last summary stays as it is.")) return;
    var state = load();
    delete state.current;
    save(state);
    this.showSetup();
  };

  Interview.prototype.finish = function () {
    var state = load();
    var current = state.current;
    if (current) {
      var self = this;
      var before = JSON.parse(JSON.stringify({ cards: state.cards, session: state.session, last: state.last || null, current: current }));
      state.undo = before;
      if (!state.undo.last) delete state.undo.last;
      current.queue.forEach(function (id) {
        if (current.grades[id]) grade(state, id, current.grades[id], current.session);
      });
      state.session = current.session;
      state.last = {
        session: current.session,
        date: localDate(new Date()),
        results: current.queue.filter(function (id) { return current.grades[id] && self.byId[id]; }).map(function (id) {
          return { id: id, grade: current.grades[id] };
        }),
        asked: current.queue.length,
      };
      delete state.current;
      save(state);
    }
    this.showSetup();
    var summary = document.getElementById("mock-summary");
    if (summary) summary.scrollIntoView({ block: "start" });
  };

  Interview.prototype.summary = function (last, heading, canUndo) {
    var self = this;
    var perTopic = {};
    var results = last.results.filter(function (r) { return self.byId[r.id]; });
    results.forEach(function (r) {
      var q = self.byId[r.id];
      var row = perTopic[q.topic] || (perTopic[q.topic] = { title: q.topic_title, knew: 0, partly: 0, missed: 0 });
      row[r.grade] += 1;
    });
    var rows = Object.keys(perTopic).map(function (topic) {
      var r = perTopic[topic];
      var count = r.knew + r.partly + r.missed;
      return el("tr", { "data-topic": topic },
        el("td", { text: r.title }), el("td", { text: String(r.knew) }), el("td", { text: String(r.partly) }),
        el("td", { text: String(r.missed) }), el("td", { class: "mock-score", text: percent(r.knew + r.partly / 2, count) }));
    });
    var points = 0;
    results.forEach(function (r) {
      points += r.grade === "knew" ? 1 : r.grade === "partly" ? 0.5 : 0;
    });
    var list = results.map(function (r) {
      var q = self.byId[r.id];
      return el("li", { class: "mock-result mock-result--" + r.grade },
        el("a", { href: siteUrl(q.url), html: q.title_html || q.title }), " — " + GRADES.filter(function (g) { return g.id === r.grade; })[0].label.toLowerCase());
    });
    return el("section", { class: "mock-summary", id: "mock-summary" },
      el("h2", { text: heading + " (" + last.date + "): " + percent(points, results.length) }),
      el("p", {}, results.length + " of " + last.asked + " questions graded; knew it counts 1, partly ½. ",
        canUndo ? el("button", { type: "button", class: "mock-link", id: "mock-undo", text: "Undo the last grade",
          onclick: function () { self.undo(); } }) : null),
      el("div", { class: "qi-scroll" }, el("table", { class: "mock-table", id: "mock-summary-table" },
        el("thead", {}, el("tr", {}, el("th", { text: "Topic" }), el("th", { text: "Knew it" }), el("th", { text: "Partly" }),
          el("th", { text: "Missed" }), el("th", { text: "Score" }))),
        el("tbody", {}, rows))),
      el("ul", { class: "mock-results" }, list));
  };

  Interview.prototype.progress = function (state) {
    var self = this;
    var ids = Object.keys(state.cards).filter(function (id) { return self.byId[id]; });
    var section = el("section", { class: "mock-progress", id: "mock-progress" },
      el("h2", { text: "Your progress in this browser" }));
    var forget = el("button", { type: "button", class: "md-button", id: "mock-reset", text: "Forget my progress",
      onclick: function () {
        if (window.confirm("Forget every grade kept in this browser?")) {
          save(normalise({}));
          self.skipped = 0;
          self.showSetup();
        }
      } });
    if (!ids.length) {
      section.appendChild(el("p", { text: "No question graded yet." }));
      section.appendChild(forget); // drawn whatever was saved: the way out of progress that cannot be read
      return section;
    }
    var next = state.session + 1;
    var rows = this.topics().map(function (first) {
      var all = self.questions.filter(function (q) { return q.topic === first.topic; });
      var seen = all.filter(function (q) { return state.cards[q.id]; });
      // the same test as "Only questions due again or missed last time": never-seen questions are not due again
      var due = all.filter(function (q) { return isDueOrMissed(state.cards[q.id], next); });
      var boxes = [0, 0, 0, 0, 0];
      seen.forEach(function (q) { boxes[state.cards[q.id].box - 1] += 1; });
      return el("tr", { "data-topic": first.topic },
        el("td", { text: first.topic_title }), el("td", { class: "mock-seen", text: seen.length + " / " + all.length }),
        el("td", { text: boxes.join(" · ") }), el("td", { text: String(due.length) }));
    });
    section.appendChild(el("p", { id: "mock-progress-line",
      text: ids.length + " question" + (ids.length === 1 ? "" : "s") + " graded over " + state.session + " interview" +
        (state.session === 1 ? "" : "s") + ". Boxes 1 to 5: a question moves up a box when you know it, back to box 1 when you miss it." }));
    section.appendChild(el("div", { class: "qi-scroll" }, el("table", { class: "mock-table" },
      el("thead", {}, el("tr", {}, el("th", { text: "Topic" }), el("th", { text: "Seen" }), el("th", { text: "In boxes 1 · 2 · 3 · 4 · 5" }),
        el("th", { text: "Due again next interview" }))),
      el("tbody", {}, rows))));
    section.appendChild(forget);
    return section;
  };

  // Progress as a file: export on the laptop, import on the phone (or keep it as a backup).
  Interview.prototype.transfer = function () {
    var self = this;
    var status = el("span", { id: "mock-transfer-status", "aria-live": "polite" });
    var file = el("input", { type: "file", id: "mock-import-file", accept: ".json,application/json", hidden: true,
      onchange: function () {
        var chosen = file.files && file.files[0];
        if (!chosen) return;
        chosen.text().then(function (text) {
          var data = JSON.parse(text);
          if (!data || data.format !== STORE || typeof data.state !== "object") throw new Error("not a progress file of this site");
          var imported = normalise(data.state);
          delete imported.current;
          var skipped = prune(imported, self.byId);
          save(imported);
          self.skipped = 0;
          self.showSetup();
          var line = document.getElementById("mock-transfer-status");
          if (line) line.textContent = "Imported " + Object.keys(imported.cards).length + " questions' progress." +
            (skipped ? " " + skippedNote(skipped) : "");
        }).catch(function (error) {
          status.textContent = "Could not import that file: " + error.message;
        });
      } });
    return el("section", { class: "mock-transfer", id: "mock-transfer" },
      el("h2", { text: "Take your progress to another device" }),
      el("div", { class: "mock-row" },
        el("button", { type: "button", class: "md-button", id: "mock-export", text: "Export progress (file)", onclick: function () {
          var blob = new Blob([JSON.stringify({ format: STORE, exported: new Date().toISOString(), state: load() }, null, 1)],
            { type: "application/json" });
          var link = el("a", { href: URL.createObjectURL(blob), download: "interview-progress-" + localDate(new Date()) + ".json" });
          document.body.appendChild(link);
          link.click();
          link.remove();
          status.textContent = "Saved. Open this page on the other device and import the file.";
        } }),
        el("button", { type: "button", class: "md-button", id: "mock-import", text: "Import progress…", onclick: function () {
          file.click();
        } }),
        file, status));
  };

  Interview.prototype.onKey = function (event) {
    if (!document.getElementById("mock-card") || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.target && /^(INPUT|SELECT|TEXTAREA)$/.test(event.target.tagName)) return;
    if ((event.key === "r" || event.key === "R") && !this.revealed) this.reveal();
    GRADES.forEach(function (g) {
      if (event.key === g.key && this.revealed) this.grade(g.id);
    }, this);
  };

  function setup() {
    var root = document.getElementById("mock-app");
    if (!root) return;
    fetch(siteUrl(root.dataset.questions))
      .then(function (response) {
        if (!response.ok) throw new Error(response.status + " " + response.statusText);
        return response.json();
      })
      .then(function (data) {
        root.textContent = "";
        try {
          new Interview(root, data);
        } catch (error) {
          showUnreadable(root, error);
        }
      }, function (error) {
        root.textContent = "";
        root.appendChild(el("p", { class: "mock-error",
          text: "Could not load the questions (" + error.message + "). Serve the site over http, e.g. `mkdocs serve`." }));
      });
  }

  // The questions loaded but the progress saved in this browser could not be drawn: say so, and offer the way out.
  function showUnreadable(root, error) {
    root.textContent = "";
    root.appendChild(el("p", { class: "mock-error",
      text: "The progress saved in this browser could not be shown (" + error.message + "). Forgetting it starts afresh." }));
    root.appendChild(el("button", { type: "button", class: "md-button", id: "mock-reset", text: "Forget my progress",
      onclick: function () {
        if (!window.confirm("Forget every grade kept in this browser?")) return;
        save(normalise({}));
        window.location.reload();
      } }));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", setup);
  else setup();
})();
