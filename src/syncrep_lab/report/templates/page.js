(function () {
  "use strict";
  var figures = JSON.parse(document.getElementById("chart-data").textContent);
  document.querySelectorAll("div.chart[data-chart]").forEach(function (el) {
    var fig = figures[el.dataset.chart];
    if (!fig) { return; }
    Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
  });
  function cellValue(row, i) {
    var text = row.cells[i] ? row.cells[i].textContent.trim() : "";
    var n = parseFloat(text.replace(/[,±%\s]/g, ""));
    return isNaN(n) ? text.toLowerCase() : n;
  }
  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("th").forEach(function (th, i) {
      th.addEventListener("click", function () {
        var body = table.tBodies[0];
        var asc = th.dataset.order !== "asc";
        th.dataset.order = asc ? "asc" : "desc";
        Array.from(body.rows).sort(function (a, b) {
          var x = cellValue(a, i), y = cellValue(b, i);
          return (x < y ? -1 : x > y ? 1 : 0) * (asc ? 1 : -1);
        }).forEach(function (row) { body.appendChild(row); });
      });
    });
  });
})();
