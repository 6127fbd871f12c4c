// Site search over the static Pagefind index in pagefind/ (made at build time; nothing is fetched
// from elsewhere). search.html?q=... shows the pages that match; without JavaScript the page
// keeps its lists of the index pages.
const params = new URLSearchParams(location.search);
const query = (params.get("q") || "").trim();
const input = document.getElementById("search-q");
const status = document.getElementById("search-status");
const list = document.getElementById("search-results");
const SHOWN = 20;

function plural(n, one, few, many) {
  const mod10 = n % 10, mod100 = n % 100;
  if (mod10 === 1 && mod100 !== 11) return one;
  if (mod10 >= 2 && mod10 <= 4 && (mod100 < 12 || mod100 > 14)) return few;
  return many;
}

function say(text) {
  status.hidden = false;
  status.textContent = text;
}

function textOf(html) {
  // Pagefind's excerpt marks the words found with <mark>: keep them, and nothing else of the markup.
  const holder = document.createElement("p");
  const parsed = new DOMParser().parseFromString(html, "text/html").body;
  for (const node of parsed.childNodes) {
    if (node.nodeName === "MARK") holder.append(Object.assign(document.createElement("mark"), {textContent: node.textContent}));
    else holder.append(document.createTextNode(node.textContent));
  }
  return holder;
}

async function run() {
  if (input) input.value = query;
  const header = document.getElementById("site-search-q");
  if (header) header.value = query;
  if (!query) return;
  say("Ищем…");
  let pagefind;
  try {
    pagefind = await import(new URL("pagefind/pagefind.js", document.baseURI).href);
  } catch (error) {
    say("Поиск недоступен: не удалось загрузить указатель. Воспользуйтесь перечнями ниже.");
    return;
  }
  const found = await pagefind.search(query);
  const results = await Promise.all(found.results.slice(0, SHOWN).map((r) => r.data()));
  list.replaceChildren();
  for (const result of results) {
    const item = document.createElement("li");
    const link = document.createElement("a");
    // Pagefind gives the URL with the site's base path already in it ("/gpu/models/x.html", from where
    // pagefind.js was loaded): resolved as given, never against this page's folder again.
    link.href = new URL(result.url, document.baseURI).href;
    link.textContent = result.meta.title || result.url;
    item.append(link, textOf(result.excerpt));
    list.append(item);
  }
  const n = found.results.length;
  say(n === 0
    ? `По запросу «${query}» ничего не нашлось.`
    : `По запросу «${query}» ${plural(n, "найдена", "найдены", "найдено")} ${n} ${plural(n, "страница", "страницы", "страниц")}` +
      (n > SHOWN ? `; показаны первые ${SHOWN}.` : "."));
}

run();
