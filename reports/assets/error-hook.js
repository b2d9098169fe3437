// Installed before the page's script, so that even a syntax error in it is recorded where a
// test (or a curious reader) finds it: the #status element's data-errors.
window.addEventListener("error", e => {
  const s = document.getElementById("status");
  s.dataset.errors = (s.dataset.errors || "") + (e.message || "error") + "\n";
});
