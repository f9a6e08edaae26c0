// Step-by-step trajectory viewer: shows one turn at a time; Prev/Next links and arrow keys.
(function () {
  const viewer = document.getElementById("viewer");
  if (!viewer) return;
  const steps = parseInt(viewer.dataset.steps, 10);
  const turns = viewer.querySelectorAll("section.turn");
  const marks = viewer.querySelectorAll(".timeline a");
  let step = parseInt(viewer.dataset.step, 10);

  function show(k) {
    step = Math.max(0, Math.min(steps, k));
    turns.forEach((t) => { t.hidden = parseInt(t.dataset.step, 10) !== step; });
    marks.forEach((m) => m.classList.toggle("current", parseInt(m.dataset.step, 10) === step));
    document.getElementById("step-number").textContent = step;
    document.getElementById("prev").classList.toggle("disabled", step === 0);
    document.getElementById("next").classList.toggle("disabled", step === steps);
    history.replaceState(null, "", "?step=" + step);
  }
  document.getElementById("prev").addEventListener("click", (e) => { e.preventDefault(); show(step - 1); });
  document.getElementById("next").addEventListener("click", (e) => { e.preventDefault(); show(step + 1); });
  marks.forEach((m) => m.addEventListener("click", (e) => { e.preventDefault(); show(parseInt(m.dataset.step, 10)); }));
  document.addEventListener("keydown", (e) => {
    if (e.key === "ArrowLeft") show(step - 1);
    if (e.key === "ArrowRight") show(step + 1);
  });
  show(step);
})();
