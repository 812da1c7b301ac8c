// The console's only script besides htmx: select-all for the queue, copy for citations.
// Served as a file (the Content-Security-Policy forbids inline script).
"use strict";
document.addEventListener("change", function (event) {
  var box = event.target;
  if (!box.matches || !box.matches("input[data-select-all]")) return;
  var name = box.getAttribute("data-select-all");
  box.form.querySelectorAll('input[type="checkbox"][name="' + name + '"]').forEach(function (b) {
    b.checked = box.checked;
  });
});
document.addEventListener("click", function (event) {
  var button = event.target;
  if (!button.matches || !button.matches("button[data-copy]")) return;
  var field = document.getElementById(button.getAttribute("data-copy"));
  if (!field) return;
  field.select();
  var done = function () { button.textContent = "Copied"; };
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(field.value).then(done, function () {});
  } else if (document.execCommand("copy")) {
    done();
  }
});
