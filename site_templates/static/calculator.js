// The «Дообучение» calculator: the rules of DESIGN.md recomputed in the browser from
// data/calculator.json (written by pipeline/calculator.py). No figure is typed here: anchors,
// constants, GPUs, servers and prices come from the JSON, the Russian text from the page.

// An interpolated 630 GB can be 630.0000000000001; like estimate.ceil_div, the ratio is shrunk
// by the pipeline's relative tolerance (from the JSON) before ceil, and a job takes at least one.
let tolerance = 0;
export const ceilDiv = (a, b) => Math.max(1, Math.ceil((a / b) * (1 - tolerance)));

// ---- formatting: the same output as pipeline/format.py (Babel ru_RU, half up) ----

// Decimal digits of a float's shortest representation (what Python's repr gives), as
// [digits, position of the decimal point], so that rounding works on the shown decimal.
function decimalDigits(value) {
  const [mantissa, exponent = "0"] = String(value).split("e");
  const [whole, fraction = ""] = mantissa.split(".");
  let digits = whole + fraction;
  let point = whole.length + Number(exponent);
  if (point < 0) {
    digits = "0".repeat(-point) + digits;
    point = 0;
  }
  if (point > digits.length) digits = digits.padEnd(point, "0");
  return [digits, point];
}

const NBSP = "\u00a0";

export function formatNumber(value, places = 1) {
  if (value === null || value === undefined || !Number.isFinite(value)) return "";
  const negative = value < 0;
  const [digits, point] = decimalDigits(Math.abs(value));
  const keep = point + places;
  const padded = digits.padEnd(keep + 1, "0");
  let kept = BigInt(padded.slice(0, keep) || "0");
  if (padded[keep] >= "5") kept += 1n;
  const text = kept.toString().padStart(places + 1, "0");
  const whole = text.slice(0, text.length - places);
  const fraction = text.slice(text.length - places).replace(/0+$/, "");
  const grouped = whole.replace(/\B(?=(\d{3})+(?!\d))/g, NBSP);
  const shown = fraction ? `${grouped},${fraction}` : grouped;
  return negative && shown.replace(/[0,\u00a0]/g, "") ? `-${shown}` : shown;
}

export const formatGb = (value) => formatNumber(value, 1);
export const formatInteger = (value) => formatNumber(value, 0);

// Parses what a reader types: "7,5", "7.5", "1 000"; null when it is not a positive number.
export function parsePositive(text) {
  const cleaned = String(text ?? "")
    .replace(/[\s\u00a0\u202f]/g, "")
    .replace(",", ".");
  if (!/^\d*\.?\d+$|^\d+\.$/.test(cleaned)) return null;
  const value = Number(cleaned);
  return Number.isFinite(value) && value > 0 ? value : null;
}

// ---- the rules ----

// Rules 1-4: estimate, range, theoretical minimum; the basis says where P lies among the anchors.
export function estimate(data, paramsB, methodId) {
  const anchors = data.anchors[methodId];
  const method = data.methods.find((m) => m.id === methodId);
  const c = data.constants;
  let lower = null;
  let upper = null;
  for (const [size, memory] of anchors) {
    if (size <= paramsB && (lower === null || size >= lower[0])) lower = [size, memory];
    if (size >= paramsB && (upper === null || size <= upper[0])) upper = [size, memory];
  }
  let memory;
  let basis;
  const p = paramsB;
  if (lower === null) {
    memory = (upper[1] * p) / upper[0];
    basis = "below_range";
  } else if (upper === null) {
    memory = (lower[1] * p) / lower[0];
    basis = "extrapolated";
  } else if (lower[0] === upper[0]) {
    memory = lower[1];
    basis = "anchor";
  } else {
    memory = lower[1] + ((upper[1] - lower[1]) * (p - lower[0])) / (upper[0] - lower[0]);
    basis = "interpolated";
  }
  const minBytes = c.adamw_weight_bytes + c.adamw_grad_bytes + c.adamw_optimizer_bytes;
  return {
    memory,
    low: memory * c.range_low_factor,
    high: memory * c.range_high_factor,
    min: method.theoretical_min_applies ? p * minBytes : null,
    basis,
    lower: lower && lower[0],
    upper: upper && upper[0],
  };
}

// Rules 5 and 7.
export function gpuFit(gpu, est) {
  const cards = ceilDiv(est.memory, gpu.memory_gb);
  const cardsHigh = ceilDiv(est.high, gpu.memory_gb);
  const nvlink = cards >= 2 ? "required" : cardsHigh >= 2 ? "recommended" : "no";
  return { cards, cardsHigh, nvlink };
}

// Rule 6.
// Rule 6, read off the counts as estimate.server_fit does: S >= high is "one server at +50 %".
export function serverFit(server, est) {
  const count = ceilDiv(est.memory, server.server_memory_gb);
  const countHigh = ceilDiv(est.high, server.server_memory_gb);
  const fit = countHigh === 1 ? "yes" : count === 1 ? "estimate_only" : "no";
  return { fit, count, countHigh };
}

// Servers that fit, cheapest first; those without a price after them.
export function fittingServers(data, est) {
  const rows = data.servers.map((server) => ({ server, ...serverFit(server, est) })).filter((r) => r.fit !== "no");
  const priced = (r) => r.server.price_rub_month !== null;
  return rows.sort(
    (a, b) =>
      priced(b) - priced(a) ||
      (a.server.price_rub_month ?? 0) - (b.server.price_rub_month ?? 0) ||
      a.server.server_memory_gb - b.server.server_memory_gb ||
      (a.server.id < b.server.id ? -1 : a.server.id > b.server.id ? 1 : 0),
  );
}

// The cheapest priced server times how many are needed, like estimate.cheapest_option.
export function cheapestOption(data, need) {
  let best = null;
  for (const server of data.servers) {
    if (server.price_rub_month === null) continue;
    const count = ceilDiv(need, server.server_memory_gb);
    const total = count * server.price_rub_month;
    const key = [total, count, server.id];
    if (best === null || compareKeys(key, best.key) < 0) best = { server, count, total, key };
  }
  return best;
}

function compareKeys(a, b) {
  for (let i = 0; i < a.length; i += 1) {
    if (a[i] < b[i]) return -1;
    if (a[i] > b[i]) return 1;
  }
  return 0;
}

// Rule 8: hours = k x P x tokens x epochs / (cards x peak FLOP/s x utilization).
export function trainingHours(data, paramsB, tokensM, epochs, cards, gpu, utilization) {
  const flops = data.constants.train_flops_per_param_token * (paramsB * 1e9) * (tokensM * 1e6) * epochs;
  return flops / (cards * gpu.bf16_dense_tflops * 1e12 * utilization) / 3600;
}

export function trainingCost(data, hours, server, servers) {
  return (hours / data.constants.hours_per_month) * server.price_rub_month * servers;
}

// ---- the page ----

const FIELDS = ["model", "params", "method", "gpu", "server", "tokens", "epochs", "util", "cards"];

const fill = (template, slots) => template.replace(/\{(\w+)\}/g, (_, key) => slots[key] ?? "");

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  node.textContent = text;
  return node;
}

function setup(form, data, text) {
  tolerance = data.ceil_relative_tolerance;
  const $ = (id) => document.getElementById(id);
  const field = (name) => form.elements.namedItem(name);
  const gpuById = new Map(data.gpus.map((g) => [g.id, g]));
  const serverById = new Map(data.servers.map((s) => [s.id, s]));
  const modelById = new Map(data.models.map((m) => [m.id, m]));
  const price = (server) =>
    server.price_rub_month === null ? text.on_request : fill(text.price, { price: formatInteger(server.price_rub_month) });

  // Options from the data: models grouped by family (in order of their smallest model).
  const modelSelect = field("model");
  const groups = new Map();
  for (const model of data.models) {
    if (!groups.has(model.family)) groups.set(model.family, element("optgroup", { label: model.family }));
    groups
      .get(model.family)
      .append(element("option", { value: model.id }, fill(text.model_option, { name: model.name, params: formatGb(model.params_b) })));
  }
  modelSelect.append(...groups.values());
  field("method").append(...data.methods.map((m) => element("option", { value: m.id }, m.name)));
  field("gpu").append(
    element("option", { value: "" }, text.gpu_any),
    ...data.gpus.map((g) => element("option", { value: g.id }, fill(text.gpu_option, { name: g.name, memory: formatGb(g.memory_gb) }))),
  );
  field("server").append(
    element("option", { value: "" }, text.server_none),
    ...data.servers.map((s) =>
      element(
        "option",
        { value: s.id },
        fill(text.server_option, { name: s.name, memory: formatGb(s.server_memory_gb), price: price(s) }),
      ),
    ),
  );

  // Restore the inputs from the URL; unknown ids are ignored.
  const query = new URLSearchParams(window.location.search);
  for (const name of FIELDS) {
    const value = query.get(name);
    if (value === null) continue;
    const input = field(name);
    if (input.tagName === "SELECT") {
      if ([...input.options].some((o) => o.value === value)) input.value = value;
    } else {
      input.value = value.replace(".", ",");
    }
  }
  if (query.has("tokens") || query.has("cards")) $("calc-time").open = true;

  function saveState() {
    const state = new URLSearchParams();
    for (const name of FIELDS) {
      const input = field(name);
      let value = input.value.trim();
      if (name === "params" && modelSelect.value !== "custom") continue;
      if (input.tagName !== "SELECT" && value) {
        const number = parsePositive(value);
        value = number === null ? value : String(number);
      }
      if (value) state.set(name, value);
    }
    const search = state.toString();
    window.history.replaceState(null, "", search ? `?${search}` : window.location.pathname);
  }

  function paramsB() {
    if (modelSelect.value !== "custom") return modelById.get(modelSelect.value).params_b;
    return parsePositive(field("params").value);
  }

  function render() {
    const custom = modelSelect.value === "custom";
    $("calc-custom").hidden = !custom;
    const p = paramsB();
    const paramsInvalid = custom && field("params").value.trim() !== "" && p === null;
    $("calc-params-error").hidden = !paramsInvalid;
    field("params").setAttribute("aria-invalid", String(paramsInvalid));
    $("calc-empty").hidden = p !== null;
    $("calc-summary").hidden = p === null;
    $("calc-output").hidden = p === null;
    const gpu = gpuById.get(field("gpu").value) ?? null;
    const server = serverById.get(field("server").value) ?? null;
    if (p === null) {
      renderTime(null, null, gpu, server);
      return;
    }
    const est = estimate(data, p, field("method").value);
    $("out-memory").textContent = formatGb(est.memory);
    $("out-low").textContent = formatGb(est.low);
    $("out-high").textContent = formatGb(est.high);
    $("out-min").textContent = est.min === null ? "" : formatGb(est.min);
    $("out-min-row").hidden = est.min === null;
    $("out-min-na").hidden = est.min !== null;
    for (const note of document.querySelectorAll("[data-basis]")) {
      note.hidden = note.dataset.basis !== est.basis;
      for (const slot of note.querySelectorAll("[data-slot]")) {
        const size = { lower: est.lower, upper: est.upper, size: est.lower }[slot.dataset.slot];
        slot.textContent = size === null ? "" : formatGb(size);
      }
    }

    const rows = data.gpus.map((g) => {
      const fit = gpuFit(g, est);
      const row = element("tr", { "data-gpu": g.id });
      if (gpu && g.id === gpu.id) row.setAttribute("aria-current", "true");
      row.append(
        element("th", { scope: "row" }, g.name),
        element("td", { class: "num", "data-cell": "memory" }, formatGb(g.memory_gb)),
        element("td", { class: "num", "data-cell": "cards" }, formatInteger(fit.cards)),
        element("td", { class: "num", "data-cell": "cards_high" }, formatInteger(fit.cardsHigh)),
        element("td", { "data-cell": "nvlink" }, text[`nvlink_${fit.nvlink}`]),
      );
      return row;
    });
    $("out-cards").tBodies[0].replaceChildren(...rows);
    $("out-gpu-line").hidden = gpu === null;
    if (gpu) {
      const fit = gpuFit(gpu, est);
      $("out-gpu-line").textContent = fill(text.gpu_line, {
        name: gpu.name,
        memory: formatGb(gpu.memory_gb),
        cards: formatInteger(fit.cards),
        cards_high: formatInteger(fit.cardsHigh),
        nvlink: text[`nvlink_${fit.nvlink}`],
      });
    }

    const fitting = fittingServers(data, est);
    $("out-servers").tBodies[0].replaceChildren(
      ...fitting.map((r) => {
        const row = element("tr", { "data-server": r.server.id });
        if (server && r.server.id === server.id) row.setAttribute("aria-current", "true");
        row.append(
          element("th", { scope: "row" }, r.server.name),
          element("td", { class: "num", "data-cell": "memory" }, formatGb(r.server.server_memory_gb)),
          element("td", { "data-cell": "fit" }, text[`fit_${r.fit}`]),
          element("td", { class: "num", "data-cell": "price" }, price(r.server)),
        );
        return row;
      }),
    );
    $("out-servers-wrap").hidden = fitting.length === 0;
    $("out-servers-none").hidden = fitting.length > 0;
    const cheapest = cheapestOption(data, est.memory);
    const cheapestHigh = cheapestOption(data, est.high);
    $("out-cheapest-row").hidden = cheapest === null;
    if (cheapest) {
      const show = (o) =>
        fill(o.count === 1 ? text.cheapest_one : text.cheapest, {
          count: formatInteger(o.count),
          name: o.server.name,
          total: formatInteger(o.total),
        });
      $("out-cheapest").textContent = show(cheapest);
      $("out-cheapest-high").textContent = show(cheapestHigh);
    }
    $("out-server-line").hidden = server === null;
    if (server) {
      const fit = serverFit(server, est);
      const shown =
        fit.fit === "no"
          ? fill(text.fit_no, { count: formatInteger(fit.count), count_high: formatInteger(fit.countHigh) })
          : text[`fit_${fit.fit}`];
      $("out-server-line").textContent = fill(text.server_line, {
        name: server.name,
        memory: formatGb(server.server_memory_gb),
        fit: shown,
      });
    }
    renderTime(p, est, gpu, server);
  }

  // Rule 8, a draft: on the chosen server's cards, or else on the chosen GPU.
  function renderTime(p, est, gpu, server) {
    const tokensM = parsePositive(field("tokens").value);
    const epochs = parsePositive(field("epochs").value);
    const utilPct = parsePositive(field("util").value);
    const utilization = utilPct === null ? data.constants.default_utilization : utilPct / 100;
    const timeGpu = server ? gpuById.get(server.gpu_id) : gpu;
    const ready = p !== null && tokensM !== null && epochs !== null && timeGpu;
    $("time-empty").hidden = Boolean(ready);
    $("time-output").hidden = !ready;
    if (!ready) return;
    const typedCards = parsePositive(field("cards").value);
    const autoCards = server ? server.gpu_count * serverFit(server, est).count : gpuFit(timeGpu, est).cards;
    const cards = typedCards === null ? autoCards : Math.ceil(typedCards);
    const hours = trainingHours(data, p, tokensM, epochs, cards, timeGpu, utilization);
    $("out-time-gpu").textContent = fill(text.time_gpu, { name: timeGpu.name, cards: formatInteger(cards) });
    $("out-hours").textContent = formatNumber(hours, 1);
    const priced = server !== null && server.price_rub_month !== null;
    $("out-cost-row").hidden = !priced;
    $("out-cost-na").hidden = priced;
    if (priced) {
      const servers = Math.ceil(cards / server.gpu_count);
      $("out-time-servers").textContent = fill(text.time_servers, { count: formatInteger(servers), name: server.name });
      $("out-cost").textContent = formatNumber(trainingCost(data, hours, server, servers), 0);
    }
  }

  form.addEventListener("input", () => {
    render();
    saveState();
  });
  form.addEventListener("change", () => {
    render();
    saveState();
  });
  form.addEventListener("submit", (event) => event.preventDefault());
  render();
  form.dataset.ready = "true";
}

const form = document.getElementById("calc");
if (form) {
  const text = JSON.parse(document.getElementById("calc-text").textContent);
  try {
    const response = await fetch(form.dataset.src);
    if (!response.ok) throw new Error(`${response.status} ${form.dataset.src}`);
    setup(form, await response.json(), text);
  } catch (error) {
    form.dataset.ready = "error";
    const message = document.getElementById("calc-load-error");
    if (message) message.hidden = false;
    throw error;
  }
}
