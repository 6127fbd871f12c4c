// Model pages: the first-principles breakdown (bars and table) recomputed live for the setup the
// reader picks. Progressive enhancement: the page ships the static bars and table of the typical
// setup; this script shows the form (partials/model-advanced.html) and redraws the same SVG and
// table cells. The estimator is calculator.js's, imported under its content-hashed name from the
// page; the data are data/calculator.json. No formula and no figure is repeated here.

const PARTS = ["weights", "gradients", "optimizer", "activations", "logits", "buffers", "overhead"];
// The form's fields, named as memory.Setup's.
const COUNT_FIELDS = ["seq_len", "micro_batch", "gpus", "lora_rank"];
const SELECT_FIELDS = { sharding: "shardings", offload: "offloads", optimizer: "optimizers", lora_targets: "lora_targets", loss: "losses" };
const CHECK_FIELDS = ["grad_checkpointing", "flash_attention", "fp8"];
const FIELDS = [...COUNT_FIELDS, ...Object.keys(SELECT_FIELDS), ...CHECK_FIELDS];
// Fields that apply to LoRA/QLoRA only; FP8 applies to full fine-tuning only (memory.Setup.problems).
const LORA_FIELDS = ["lora_rank", "lora_targets"];
const SVG = "http://www.w3.org/2000/svg";

const isFull = (methodId) => methodId.startsWith("full");

// The typical setup the static page shows: Setup()'s defaults with the fields of the calculator link.
// Its card count is null when some method runs on several cards: each then takes its own bar's
// count (memory_breakdown's gpus, the cards its recommendation uses).
function typicalSetup(defaults, query, cards) {
  const setup = { ...defaults, gpus: Object.values(cards).some((n) => n > 1) ? null : 1 };
  for (const [name, value] of new URLSearchParams(query)) {
    if (COUNT_FIELDS.includes(name)) setup[name] = Number(value);
    else if (CHECK_FIELDS.includes(name)) setup[name] = value === "1";
    else if (name in SELECT_FIELDS) setup[name] = value;
  }
  return setup;
}

// One bar's setup: the fields that do not apply to its method keep Setup()'s defaults; with no card
// count chosen, the method's own count and, on several cards, the typical multi-GPU sharding and
// offload (first_principles.typical_setup).
function methodSetup(setup, methodId, defaults, own) {
  const values = { ...setup, method: methodId };
  if (setup.gpus === null) {
    const mine = own[methodId];
    values.gpus = mine.gpus;
    // A sharding or offload the reader chose applies; the form's defaults give way to the method's own.
    if (mine.gpus > 1 && setup.sharding === defaults.sharding) values.sharding = mine.sharding;
    if (mine.gpus > 1 && setup.offload === defaults.offload) values.offload = mine.offload;
  }
  if (isFull(methodId)) for (const name of LORA_FIELDS) values[name] = defaults[name];
  else values.fp8 = defaults.fp8;
  return values;
}

function start(form, data, calc, text) {
  const { estimateBreakdown, setupProblems, parseCount, formatGb, formatInteger } = calc;
  const fill = (template, slots) => calc.fillText(data.plural, template, slots);
  const $ = (id) => document.getElementById(id);
  const field = (name) => form.elements.namedItem(name);
  const est = data.estimator;
  const arch = est.architectures[form.dataset.model];
  const figure = $("bd-figure");
  const svg = figure?.querySelector("svg");
  if (!arch || !svg) {
    form.dataset.ready = "unavailable";
    return;
  }
  const defaults = est.setup_defaults;
  const gb = est.units.gb;
  const labelWidth = Number(svg.dataset.labelWidth);
  const barWidth = Number(svg.dataset.barWidth);
  const partLabel = Object.fromEntries([...figure.querySelectorAll(".legend li[data-part]")].map((li) => [li.dataset.part, li.textContent]));
  const bars = [...svg.querySelectorAll("g[data-method]")];
  const methods = bars.map((g) => g.dataset.method);
  // Each method's own setup on the static page: its cards, and its sharding on several.
  const own = Object.fromEntries(
    bars.map((g) => [g.dataset.method, { gpus: Number(g.dataset.gpus), sharding: g.dataset.sharding, offload: est.typical_multi_gpu_offload }]),
  );
  const typical = typicalSetup(defaults, form.dataset.query, Object.fromEntries(methods.map((m) => [m, own[m].gpus])));
  const severalSharding = Object.values(own).find((o) => o.gpus > 1)?.sharding ?? est.typical_multi_gpu_sharding;
  // Table rows by method: the row header links to methods/<id>.html.
  const rows = new Map();
  for (const row of $("bd-table")?.querySelectorAll("tbody tr") ?? []) {
    const href = row.querySelector("th a")?.getAttribute("href") ?? "";
    const id = methods.find((m) => href.endsWith(`/${m}.html`));
    if (id) rows.set(id, row);
  }
  const link = $("bd-calculator");
  const linkBase = link?.getAttribute("href").split("?")[0];

  for (const [name, list] of Object.entries(SELECT_FIELDS)) {
    field(name).replaceChildren(
      ...est.options[list].map((id) => {
        const option = document.createElement("option");
        option.value = id;
        option.textContent = text[`option_${name}_${id}`] ?? id;
        return option;
      }),
    );
  }

  function show(setup) {
    for (const name of COUNT_FIELDS) {
      field(name).value = setup[name] === null ? "" : String(setup[name]);
      field(name).setAttribute("aria-invalid", "false");
    }
    for (const name of Object.keys(SELECT_FIELDS)) field(name).value = setup[name];
    for (const name of CHECK_FIELDS) field(name).checked = setup[name];
  }

  // The form as a Setup (method aside), and the labels of the fields that are not whole numbers.
  function read() {
    const setup = { ...defaults };
    const invalid = [];
    for (const name of COUNT_FIELDS) {
      // An empty card count: each method on its own cards, as the static page shows them.
      const perMethod = name === "gpus" && typical.gpus === null && field(name).value.trim() === "";
      const count = perMethod ? null : parseCount(field(name).value);
      field(name).setAttribute("aria-invalid", String(count === null && !perMethod));
      if (count === null && !perMethod) invalid.push(field(name).labels[0].textContent);
      setup[name] = count;
    }
    for (const name of Object.keys(SELECT_FIELDS)) setup[name] = field(name).value;
    for (const name of CHECK_FIELDS) setup[name] = field(name).checked;
    return { setup, invalid };
  }

  // EstimatorTables.setup_text, plus what it leaves out because the typical setup never has it.
  function setupText(s) {
    let extra = "";
    if (s.grad_checkpointing) extra += text.setup_gc;
    if (!s.flash_attention) extra += text.setup_eager;
    if (s.loss === "chunked") extra += text.setup_chunked;
    if (s.lora_rank !== typical.lora_rank || s.lora_targets !== typical.lora_targets) {
      extra += fill(text.setup_lora, { rank: String(s.lora_rank), targets: text[`targets_${s.lora_targets}`] });
    }
    if (s.optimizer !== "adamw") extra += fill(text.setup_optimizer, { optimizer: text[`optimizer_${s.optimizer}`] });
    if (s.offload !== "none") extra += text[`setup_offload_${s.offload}`];
    if (s.fp8) extra += text.setup_fp8;
    if (s.gpus === null) {
      const sharding = s.sharding === defaults.sharding ? severalSharding : s.sharding;
      return fill(text.setup_text_recommended, { seq: formatInteger(s.seq_len), batch: formatInteger(s.micro_batch), sharding: text[`sharding_${sharding}`], extra });
    }
    return fill(text.setup_text, {
      seq: formatInteger(s.seq_len),
      batch: formatInteger(s.micro_batch),
      gpus: formatInteger(s.gpus),
      sharding: text[`sharding_${s.sharding}`],
      extra,
    });
  }

  // The calculator link carries the chosen setup: the keys the static link has, then every other
  // field that differs from Setup()'s defaults (as the calculator writes its own URL).
  function updateLink(setup) {
    if (!link) return;
    const query = new URLSearchParams(form.dataset.query);
    const encode = (value) => (typeof value === "boolean" ? (value ? "1" : "0") : String(value));
    for (const name of FIELDS) {
      if (setup[name] === null) query.delete(name);
      else if (query.has(name) || setup[name] !== defaults[name]) query.set(name, encode(setup[name]));
    }
    // FP8 shows in the calculator for full fine-tuning only.
    if (setup.fp8) query.set("method", "full_amp");
    link.setAttribute("href", `${linkBase}?${query}`);
  }

  function drawBar(g, parts, total, widest) {
    for (const rect of g.querySelectorAll("rect")) rect.remove();
    const totalText = g.querySelector(".bar-total");
    let x = 0;
    for (const part of PARTS) {
      // EstimatorTables.bars: each part's share of the widest bar, in GB; empty parts are not drawn.
      const width = (parts[part] / widest) * barWidth;
      if (width > 0) {
        const rect = document.createElementNS(SVG, "rect");
        for (const [key, value] of Object.entries({ x: labelWidth + x, y: 3, width, height: 9, class: `part-${part}` })) {
          rect.setAttribute(key, String(value));
        }
        const title = document.createElementNS(SVG, "title");
        title.textContent = fill(text.bar_part, { part: partLabel[part], gb: formatGb(parts[part]) });
        rect.append(title);
        g.insertBefore(rect, totalText);
      }
      x += width;
    }
    totalText.setAttribute("x", String(labelWidth + x + 1));
    totalText.textContent = fill(text.bar_total, { gb: formatGb(total) });
  }

  function render(announce) {
    const { setup, invalid } = read();
    const problems = [];
    if (!invalid.length) {
      for (const m of methods) for (const code of setupProblems(data, methodSetup(setup, m, defaults, own))) if (!problems.includes(code)) problems.push(code);
    }
    const messages = [...invalid.map((label) => fill(text.not_integer, { label })), ...problems.map((code) => text[code] ?? code)];
    $("bd-problem-list").replaceChildren(
      ...messages.map((m) => {
        const item = document.createElement("li");
        item.textContent = m;
        return item;
      }),
    );
    $("bd-problems").hidden = messages.length === 0;
    figure.classList.toggle("bd-invalid", messages.length > 0);
    $("bd-table").hidden = messages.length > 0;
    updateLink(setup);
    if (messages.length) {
      figure.dataset.raw = JSON.stringify({ problems: invalid.length ? ["not_integer"] : problems });
      $("bd-status").textContent = "";
      return;
    }

    const breakdowns = Object.fromEntries(methods.map((m) => [m, estimateBreakdown(data, arch, methodSetup(setup, m, defaults, own))]));
    // In GB, as memory.Breakdown.gb() gives them to the static page.
    const inGb = Object.fromEntries(
      methods.map((m) => [m, Object.fromEntries([...PARTS, "total"].map((p) => [p, breakdowns[m][p] / gb]))]),
    );
    const widest = Math.max(...methods.map((m) => inGb[m].total));
    for (const g of bars) drawBar(g, inGb[g.dataset.method], inGb[g.dataset.method].total, widest);
    for (const [m, row] of rows) {
      // EstimatorTables.breakdown_table: cards, the parts, the total per card (then the table rule's figure).
      const cells = row.querySelectorAll("td");
      cells[0].textContent = formatInteger(methodSetup(setup, m, defaults, own).gpus);
      PARTS.forEach((part, i) => {
        cells[i + 1].textContent = formatGb(inGb[m][part]);
      });
      cells[PARTS.length + 1].textContent = formatGb(inGb[m].total);
    }

    const words = setupText(setup);
    const changed = FIELDS.some((name) => setup[name] !== typical[name]);
    $("bd-setup").textContent = words;
    $("bd-setup-kind").textContent = changed ? text.kind_chosen : text.kind_typical;
    $("breakdown-title").textContent = fill(text.bar_title, { model: form.dataset.modelName, setup: words });
    if (announce) $("bd-status").textContent = fill(text.status, { setup: words });
    figure.dataset.raw = JSON.stringify({ problems: [], setup, breakdown: breakdowns });
  }

  show(typical);
  form.addEventListener("input", () => render(true));
  form.addEventListener("change", () => render(true));
  form.addEventListener("submit", (event) => event.preventDefault());
  $("bd-reset").addEventListener("click", () => {
    show(typical);
    render(true);
  });
  render(false);
  form.hidden = false;
  form.dataset.ready = "true";
}

// Outside a browser (a test importing the module) there is no page to enhance.
const form = globalThis.document?.getElementById("bd-form");
if (form) {
  const text = JSON.parse(document.getElementById("bd-text").textContent);
  try {
    const [calc, data] = await Promise.all([
      import(new URL(form.dataset.calculator, document.baseURI).href),
      fetch(form.dataset.src).then((response) => {
        if (!response.ok) throw new Error(`${response.status} ${form.dataset.src}`);
        return response.json();
      }),
    ]);
    start(form, data, calc, text);
  } catch (error) {
    // The static bars and table stay as they are.
    form.dataset.ready = "error";
    throw error;
  }
}
