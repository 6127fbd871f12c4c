// Sortable tables by progressive enhancement: the table is complete without this script.
// Each header of a table.sortable becomes a button; numbers are read the Russian way ("1 200", "6,9").
const number = (text) => {
  const match = text.replace(/[\s\u00a0]/g, "").replace("−", "-").match(/^-?\d+(?:,\d+)?/);
  return match ? parseFloat(match[0].replace(",", ".")) : null;
};

const key = (row, index) => (row.cells[index] ? row.cells[index].textContent.trim() : "");

function sortBy(table, index, header) {
  const body = table.tBodies[0];
  const ascending = header.getAttribute("aria-sort") !== "ascending";
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a, index), y = key(b, index);
    const nx = number(x), ny = number(y);
    const order = nx !== null && ny !== null ? nx - ny : x.localeCompare(y, "ru");
    return ascending ? order : -order;
  });
  for (const th of table.tHead.rows[0].cells) th.removeAttribute("aria-sort");
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
  body.append(...rows);
}

for (const table of document.querySelectorAll("table.sortable")) {
  Array.from(table.tHead.rows[0].cells).forEach((th, index) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.append(...th.childNodes);
    button.addEventListener("click", () => sortBy(table, index, th));
    th.append(button);
  });
}
