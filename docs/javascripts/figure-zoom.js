// A figure drawn from the evidence opens full size in an overlay on the same page (no navigation away):
// click or tap it; Esc, the close button or a click outside the image closes it. Without JavaScript the
// figure's link still opens the SVG itself.
(function () {
  "use strict";
  var overlay = null;

  function build() {
    overlay = document.createElement("dialog");
    overlay.className = "study-figure-overlay";
    overlay.setAttribute("aria-label", "Figure, full size");
    overlay.innerHTML =
      '<button type="button" class="study-figure-close" aria-label="Close the figure">×</button>' +
      '<div class="study-figure-pan"><img alt=""></div><p class="study-figure-caption"></p>';
    overlay.querySelector(".study-figure-close").addEventListener("click", close);
    overlay.addEventListener("click", function (event) {
      if (event.target === overlay || event.target.classList.contains("study-figure-pan")) close();
    });
    overlay.addEventListener("close", function () {
      document.documentElement.classList.remove("study-figure-open");
    });
    document.body.appendChild(overlay);
  }

  function open(link) {
    if (!overlay) build();
    var image = link.querySelector("img");
    var shown = overlay.querySelector("img");
    shown.src = link.getAttribute("href");
    shown.alt = image ? image.alt : "";
    var caption = link.closest("figure") && link.closest("figure").querySelector("figcaption");
    overlay.querySelector(".study-figure-caption").textContent = caption ? caption.textContent.replace(/; tap or click it to enlarge\.?$/, ".") : "";
    document.documentElement.classList.add("study-figure-open");
    overlay.showModal();
    overlay.querySelector(".study-figure-close").focus();
  }

  function close() {
    if (overlay && overlay.open) overlay.close();
  }

  document.addEventListener("click", function (event) {
    var link = event.target.closest && event.target.closest("a.study-figure-zoom");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
    if (typeof HTMLDialogElement === "undefined") return; // an old browser follows the link instead
    event.preventDefault();
    open(link);
  });
})();
