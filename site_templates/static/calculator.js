// The «Дообучение» calculator: the rules of docs/rules.md recomputed in the browser from
// data/calculator.json (written by pipeline/render/calculator_json.py). No figure is typed here: anchors,
// constants, GPUs, servers and prices come from the JSON, the Russian text from the page.

// An interpolated 630 GB can be 630.0000000000001; like estimate.ceil_div, the ratio is shrunk
// by the pipeline's relative tolerance (from the JSON) before ceil, and a job takes at least one.
let tolerance = 0;
export const ceilDiv = (a, b) => Math.max(1, Math.ceil((a / b) * (1 - tolerance)));

// ---- formatting: the same output as pipeline/render/format.py (Babel ru_RU, half up) ----

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

// A cell that a spreadsheet would read as a formula (a server named "+8 × B300", "=cmd…") gets a leading
// apostrophe, as the site's own downloads do (pipeline/render/format.py FORMULA_PREFIXES, OWASP's advice).
export const FORMULA_PREFIXES = ["=", "+", "-", "@", "\t", "\r"];
export function spreadsheetSafe(text) {
  return FORMULA_PREFIXES.some((p) => text.startsWith(p)) ? "'" + text : text;
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
  // Within anchor_size_tolerance of the smallest or largest anchor, the size is that anchor's.
  const near = c.anchor_size_tolerance;
  if (lower === null) {
    memory = (upper[1] * p) / upper[0];
    basis = p < upper[0] * (1 - near) ? "below_range" : "anchor";
  } else if (upper === null) {
    memory = (lower[1] * p) / lower[0];
    basis = p > lower[0] * (1 + near) ? "extrapolated" : "anchor";
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
  // Rule 10: a card without NVLink never gets "required"; the table says it runs over PCIe only, or over
  // its own direct link (Infinity Fabric): table_rule.nvlink_need.
  const nvlink =
    gpu.interconnect === "infinity-fabric" && cardsHigh >= 2
      ? "other_link"
      : !gpu.has_nvlink && cardsHigh >= 2
        ? "pcie_only"
        : cards >= 2
          ? "required"
          : cardsHigh >= 2
            ? "recommended"
            : "no";
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

function compareKeys(a, b) {
  for (let i = 0; i < a.length; i += 1) {
    if (a[i] < b[i]) return -1;
    if (a[i] > b[i]) return 1;
  }
  return 0;
}

// recommend.rental_cost: an hourly price bills the hours; a monthly one whole months (of hours_per_month
// hours), at least the row's minimum term (one month when none is stated). Never monthly price / 720.
export function rentalCost(data, hours, server, servers) {
  if (server.price_rub_hour !== null && server.price_rub_hour !== undefined) return hours * server.price_rub_hour * servers;
  if (server.price_rub_month === null) return null;
  const months = Math.max(server.min_term_months ?? 1, Math.ceil(hours / data.constants.hours_per_month - 1e-9));
  return months * server.price_rub_month * servers;
}

export function trainingCost(data, hours, server, servers) {
  return rentalCost(data, hours, server, servers);
}

// ---- the first-principles estimator (advanced mode): pipeline/estimate/architecture.py and pipeline/estimate/first_principles.py ----
// Ported line by line, so that every part agrees with Python's to the last bits of a float.

const QV = new Set(["q", "v", "q_a", "q_b", "kv_a", "kv_b"]);

const linear = (name, group, inFeatures, outFeatures, count) => ({ name, group, inFeatures, outFeatures, count });
const linearParams = (x) => x.inFeatures * x.outFeatures * x.count;
const isMoe = (a) => a.experts > 0;

function attentionLinears(a) {
  const n = a.layers;
  if (a.attention_kind === "mla") {
    const qkHead = a.qk_nope_head_dim + a.qk_rope_head_dim;
    const query = a.q_lora_rank
      ? [linear("q_a", "attention", a.hidden, a.q_lora_rank, n), linear("q_b", "attention", a.q_lora_rank, a.heads * qkHead, n)]
      : [linear("q", "attention", a.hidden, a.heads * qkHead, n)];
    return [
      ...query,
      linear("kv_a", "attention", a.hidden, a.kv_lora_rank + a.qk_rope_head_dim, n),
      linear("kv_b", "attention", a.kv_lora_rank, a.heads * (a.qk_nope_head_dim + a.v_head_dim), n),
      linear("o", "attention", a.heads * a.v_head_dim, a.hidden, n),
    ];
  }
  const qOut = a.heads * a.head_dim;
  const kvOut = a.kv_heads * a.head_dim;
  return [
    linear("q", "attention", a.hidden, qOut, n),
    linear("k", "attention", a.hidden, kvOut, n),
    linear("v", "attention", a.hidden, kvOut, n),
    linear("o", "attention", qOut, a.hidden, n),
  ];
}

function mlpLinears(prefix, group, hidden, width, gated, count) {
  if (count === 0) return [];
  const out = gated ? [linear(`${prefix}gate`, group, hidden, width, count)] : [];
  return [...out, linear(`${prefix}up`, group, hidden, width, count), linear(`${prefix}down`, group, width, hidden, count)];
}

export function linearLayers(a) {
  const denseCount = isMoe(a) ? a.dense_layers : a.layers;
  let out = [...attentionLinears(a), ...mlpLinears("", "mlp", a.hidden, a.intermediate, a.gated_mlp, denseCount)];
  if (isMoe(a)) {
    const moe = a.layers - a.dense_layers;
    out = [
      ...out,
      ...mlpLinears("shared_", "mlp", a.hidden, a.moe_intermediate, a.gated_mlp, moe * a.shared_experts),
      ...mlpLinears("", "expert", a.hidden, a.moe_intermediate, a.gated_mlp, moe * a.experts),
      linear("router", "router", a.hidden, a.experts, moe),
    ];
  }
  return out;
}

const sum = (values) => values.reduce((total, v) => total + v, 0);

const countsCache = new WeakMap();

// architecture.parameter_counts; integers well below 2^53, so exact as in Python.
export function parameterCounts(a) {
  if (countsCache.has(a)) return countsCache.get(a);
  const linears = linearLayers(a);
  const embedding = a.vocab * a.hidden;
  const lmHead = a.tied_embeddings ? 0 : embedding;
  const bias = !a.qkv_bias || a.attention_kind === "mla" ? 0 : a.layers * (a.heads + 2 * a.kv_heads) * a.head_dim;
  const attention = sum(linears.filter((x) => x.group === "attention").map(linearParams)) + bias;
  const mlp = sum(linears.filter((x) => x.group !== "attention").map(linearParams));
  let perLayerNorms = 2 * a.hidden;
  if (a.attention_kind === "mla") perLayerNorms += a.q_lora_rank + a.kv_lora_rank;
  const norms = a.layers * perLayerNorms + a.hidden;
  const total = embedding + lmHead + attention + mlp + norms;
  const routed = sum(linears.filter((x) => x.group === "expert").map(linearParams));
  const idle = isMoe(a) ? routed - Math.floor(routed / a.experts) * a.experts_per_token : 0;
  const largest = Math.max(embedding, lmHead, ...linears.map((x) => x.inFeatures * x.outFeatures));
  const counts = { embedding, lmHead, attention, mlp, norms, total, active: total - idle, largest };
  countsCache.set(a, counts);
  return counts;
}

export function loraTrainableParams(a, rank, targets, lmHead = false) {
  const groups = { attention: ["attention"], all: ["attention", "mlp", "expert"] };
  const pick = (x) => (targets === "qv" ? QV.has(x.name) : targets === "qkv" ? QV.has(x.name) || x.name === "k" : groups[targets].includes(x.group));
  const chosen = linearLayers(a).filter(pick);
  const head = lmHead ? rank * (a.hidden + a.vocab) : 0;
  return sum(chosen.map((x) => rank * (x.inFeatures + x.outFeatures) * x.count)) + head;
}

// architecture.synthetic_architecture: the reference's shape, only the number of layers changes.
export function syntheticArchitecture(paramsB, reference) {
  const dense = { ...reference, experts: 0, experts_per_token: 0, shared_experts: 0, moe_intermediate: 0, dense_layers: 0, layers: 1 };
  const totalOf = (layers) => parameterCounts({ ...dense, layers }).total;
  const one = totalOf(1);
  const perLayer = totalOf(2) - one;
  const target = paramsB * 1e9;
  const guess = (target - (one - perLayer)) / perLayer;
  const candidates = [...new Set([Math.max(1, Math.floor(guess)), Math.max(1, Math.ceil(guess))])].sort((x, y) => x - y);
  let layers = candidates[0];
  for (const n of candidates.slice(1)) if (Math.abs(totalOf(n) - target) < Math.abs(totalOf(layers) - target)) layers = n;
  return { ...dense, layers };
}

// memory.nearest_reference: the named dense model nearest in size, whose shape a model without a config takes.
export function nearestReference(data, paramsB) {
  const est = data.estimator;
  const size = paramsB * 1e9;
  let best = null;
  for (const id of est.dense_references) {
    const total = parameterCounts(est.architectures[id]).total;
    const key = [Math.abs(Math.log(total / size)), total];
    if (best === null || compareKeys(key, best.key) < 0) best = { id, key };
  }
  return best && best.id;
}

// The shape memory.model_architectures gives a model without a config: the named dense model nearest in size.
export function customArchitecture(data, paramsB) {
  const id = nearestReference(data, paramsB);
  return id && syntheticArchitecture(paramsB, data.estimator.architectures[id]);
}

// A problem of a pasted config.json: `code` names the page's Russian message, `values` fill it.
export class ConfigError extends Error {
  constructor(code, values = {}) {
    super(code);
    this.code = code;
    this.values = values;
  }
}

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
// Python's truthiness, which architecture_from_config relies on: empty arrays and objects are false too.
const truthy = (value) =>
  !(value === null || value === undefined || value === false || value === 0 || value === "") &&
  !(Array.isArray(value) && value.length === 0) &&
  !(isObject(value) && Object.keys(value).length === 0);

// architecture.architecture_from_config: the Architecture of a Hugging Face config.json (already parsed).
export function architectureFromConfig(data, parsed) {
  const cfg = data.estimator.config;
  if (!isObject(parsed)) throw new ConfigError("config_object");
  const config = isObject(parsed.text_config) ? { ...parsed, ...parsed.text_config } : parsed;
  const first = (names, fallback = null, required = true) => {
    for (const name of names) if (config[name] !== null && config[name] !== undefined) return config[name];
    if (required && fallback === null) throw new ConfigError("config_missing", { names: names.join(" / ") });
    return fallback;
  };
  const whole = (value, name) => {
    if (typeof value !== "number" || !Number.isInteger(value) || value < 0) {
      throw new ConfigError("config_not_whole", { name, value: JSON.stringify(value) });
    }
    return value;
  };
  const k = cfg.keys;
  const modelType = truthy(config.model_type) ? String(config.model_type) : "";
  const layers = whole(first(k.layers), k.layers[0]);
  const hidden = whole(first(k.hidden), k.hidden[0]);
  const heads = whole(first(k.heads), k.heads[0]);
  if (layers < 1 || hidden < 1 || heads < 1) throw new ConfigError("config_at_least_one");
  const intermediate = whole(first(k.intermediate, 4 * hidden), k.intermediate[0]);
  const kvDefault = truthy(config.multi_query) ? 1 : heads;
  const kvHeads = whole(first(k.kv_heads, kvDefault), k.kv_heads[0]);
  const headDim = whole(first(k.head_dim, Math.floor(hidden / heads)), k.head_dim[0]);
  const vocab = whole(first(k.vocab), k.vocab[0]);
  const tiedValue = config.tie_word_embeddings;
  const tied = tiedValue === null || tiedValue === undefined ? cfg.tied_by_default.includes(modelType) : truthy(tiedValue);
  const arch = {
    layers,
    hidden,
    intermediate,
    heads,
    kv_heads: Math.max(1, kvHeads),
    head_dim: headDim,
    vocab,
    tied_embeddings: tied,
    gated_mlp: !cfg.plain_mlp_types.includes(modelType),
    qkv_bias: truthy(config.attention_bias) || truthy(config.qkv_bias) || modelType === "qwen2",
    experts: 0,
    experts_per_token: 0,
    shared_experts: 0,
    moe_intermediate: 0,
    dense_layers: 0,
    attention_kind: "mha",
    q_lora_rank: 0,
    kv_lora_rank: 0,
    qk_rope_head_dim: 0,
    qk_nope_head_dim: 0,
    v_head_dim: 0,
    logit_softcapping: config.final_logit_softcapping !== undefined && config.final_logit_softcapping !== null,
  };
  const experts = first(k.experts, 0, false);
  if (truthy(experts)) {
    arch.experts = whole(experts, "num_experts");
    arch.experts_per_token = whole(first(k.experts_per_token), k.experts_per_token[0]);
    const shared = first(k.shared_experts, 0, false);
    arch.shared_experts = whole(truthy(shared) ? shared : 0, "n_shared_experts");
    arch.moe_intermediate = whole(first(k.moe_intermediate, intermediate, false), "moe_intermediate_size");
    const dense = first(k.dense_layers, 0, false);
    arch.dense_layers = whole(truthy(dense) ? dense : 0, "first_k_dense_replace");
  }
  if (truthy(config.kv_lora_rank)) {
    arch.attention_kind = "mla";
    arch.q_lora_rank = whole(truthy(config.q_lora_rank) ? config.q_lora_rank : 0, "q_lora_rank");
    arch.kv_lora_rank = whole(config.kv_lora_rank, "kv_lora_rank");
    for (const name of ["qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"]) arch[name] = whole(first(k[name]), name);
    arch.qkv_bias = false;
  }
  return arch;
}

// A pasted config.json's text: the architecture, or a ConfigError (code config_json when it is not JSON).
export function parseConfigText(data, textValue) {
  let parsed;
  try {
    parsed = JSON.parse(textValue);
  } catch (error) {
    throw new ConfigError("config_json", { detail: error.message });
  }
  return architectureFromConfig(data, parsed);
}

const isFull = (setup) => setup.method.startsWith("full");
const baseBits = (setup) => (setup.method.startsWith("qlora") ? Number(setup.method.split("_")[1].replace(/bit$/, "")) : 16);

// memory.Setup.problems, as codes (the page has the Russian text of each).
export function setupProblems(data, setup) {
  const o = data.estimator.options;
  const found = [];
  const allowed = {
    method: data.methods.map((m) => m.id),
    optimizer: o.optimizers,
    sharding: o.shardings,
    offload: o.offloads,
    lora_targets: o.lora_targets,
    loss: o.losses,
  };
  for (const [name, values] of Object.entries(allowed)) if (!values.includes(setup[name])) found.push(`unknown_${name}`);
  const counts = ["seq_len", "micro_batch", "grad_accum", "gpus", ...(isFull(setup) ? [] : ["lora_rank"])];
  for (const name of counts) if (setup[name] < 1) found.push(`min_${name}`);
  if (setup.offload !== "none" && setup.sharding === "ddp") found.push("offload_ddp");
  if (setup.offload === "full" && setup.sharding !== "zero3") found.push("offload_full");
  const qlora = setup.method.startsWith("qlora");
  if (setup.double_quant && !qlora) found.push("double_quant_qlora");
  if (setup.quantized_lm_head && !qlora) found.push("quantized_head_qlora");
  if (setup.lora_dropout && isFull(setup)) found.push("dropout_full");
  if (setup.lora_lm_head && isFull(setup)) found.push("head_full");
  if (setup.frozen_fp32 && isFull(setup)) found.push("frozen_full");
  if (setup.fp8 && setup.method.startsWith("qlora")) found.push("fp8_full");
  if (setup.optimizer_in_backward && setup.grad_accum > 1) found.push("in_backward_accum");
  if (setup.optimizer_in_backward && setup.offload !== "none") found.push("in_backward_offload");
  if (o.paged.includes(setup.optimizer) && setup.offload !== "none") found.push("paged_offload");
  if (setup.torch_compile) found.push("torch_compile");
  return found;
}

function widths(a) {
  if (a.attention_kind === "mla") {
    const qk = a.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim);
    return [qk, qk, a.heads * a.v_head_dim, a.heads * a.v_head_dim];
  }
  const q = a.heads * a.head_dim;
  const kv = a.kv_heads * a.head_dim;
  return [q, kv, kv, q];
}

const mlpWidth = (a, moeLayer) => (moeLayer ? (a.experts_per_token + a.shared_experts) * a.moe_intermediate : a.intermediate);

export function layerActivationBytes(a, setup, c, units, moeLayer) {
  const act = c.activation_bytes;
  const h = a.hidden;
  const [q, k, v, oIn] = widths(a);
  const mlp = mlpWidth(a, moeLayer);
  let linearInputs = act * oIn; // the attention output, kept by the attention kernel
  let kept = 2 * c.norm_input_bytes * h + act * (q + k + v);
  kept += act * (a.gated_mlp ? 3 : 1) * mlp;
  // A frozen layer's matmul keeps no input; an adapter behind dropout keeps its dropped copy instead (below).
  const readsInputs = isFull(setup) || setup.method.startsWith("qlora") || !setup.lora_dropout;
  if (readsInputs) linearInputs += act * h;
  if (readsInputs && (isFull(setup) || setup.lora_targets === "all" || setup.method.startsWith("qlora")))
    linearInputs += act * (h + mlp);
  if (!isFull(setup) && setup.lora_dropout) {
    const perInput = act + c.dropout_mask_bytes;
    const up = (a.gated_mlp ? 2 : 1) * h;
    const adapted = { qv: 2 * h, qkv: 3 * h, attention: 3 * h + oIn, all: 3 * h + oIn + up + mlp };
    kept += perInput * adapted[setup.lora_targets];
  }
  if (moeLayer) kept += act * h * a.experts_per_token;
  if (setup.fp8 && isFull(setup)) linearInputs /= act / units.fp8; // LoRA's bf16 adapters keep their own inputs
  let total = kept + linearInputs;
  if (!setup.flash_attention) total += c.eager_attention_score_bytes * a.heads * setup.seq_len;
  return total;
}

export function activationBytes(a, setup, c, units) {
  const [kept, recomputed] = activationSplit(a, setup, c, units);
  return kept + recomputed;
}

// memory.activation_split: what stays through the backward pass, and the one layer checkpointing recomputes.
export function activationSplit(a, setup, c, units) {
  const tokens = setup.seq_len * setup.micro_batch;
  const moeLayers = isMoe(a) ? a.layers - a.dense_layers : 0;
  const dense = layerActivationBytes(a, setup, c, units, false);
  const moe = moeLayers ? layerActivationBytes(a, setup, c, units, true) : 0;
  const head = setup.lora_lm_head || setup.quantized_lm_head ? c.activation_bytes * a.hidden : 0;
  if (!setup.grad_checkpointing) return [tokens * ((a.layers - moeLayers) * dense + moeLayers * moe + head), 0];
  const residual = setup.frozen_fp32 ? units.fp32 : c.activation_bytes;
  return [tokens * (a.layers * residual * a.hidden + head), tokens * Math.max(dense, moe)];
}

export function logitsBytes(a, setup, c) {
  const tokens = setup.seq_len * setup.micro_batch;
  if (setup.loss === "fused") return tokens * a.hidden * c.fused_loss_bytes_per_hidden;
  if (setup.loss === "unsloth") return tokens * a.vocab * c.logits_inplace_bytes;
  // Gemma 2's final-logit soft-capping: the bf16 tanh output is kept for the backward pass.
  const softcap = a.logit_softcapping ? c.activation_bytes : 0;
  if (setup.loss === "chunked") {
    const fp32Part = c.logits_bytes - c.logits_chunked_bytes;
    return tokens * a.vocab * (c.logits_chunked_bytes + softcap + fp32Part / c.loss_chunks);
  }
  const perElement = setup.loss === "hf_legacy" ? c.logits_legacy_bytes : c.logits_bytes;
  return tokens * a.vocab * (perElement + softcap);
}

// memory.quant_constant_bytes: quantisation scales per weight, with or without double quantisation.
function quantConstantBytes(setup, c) {
  if (setup.double_quant) {
    return c.double_quant_scale_bytes / c.quant_block_size + c.quant_scale_bytes / (c.quant_block_size * c.double_quant_block_size);
  }
  return c.quant_scale_bytes / c.quant_block_size;
}

// memory._unit_params: one decoder layer's parameters (the largest) and the root unit's.
function unitParams(a) {
  const counts = parameterCounts(a);
  const root = counts.embedding + counts.lmHead + a.hidden;
  if (!isMoe(a)) return [(counts.total - root) / a.layers, root];
  const perLayer = (counts.attention + counts.norms - a.hidden) / a.layers;
  const denseMlp = (a.gated_mlp ? 3 : 2) * a.hidden * a.intermediate;
  const moeMlp = (counts.mlp - a.dense_layers * denseMlp) / (a.layers - a.dense_layers);
  return [perLayer + Math.max(moeMlp, a.dense_layers ? denseMlp : 0), root];
}

// memory._weight_bytes: all weights on one unsharded GPU, one decoder layer's, the root unit's.
function weightBytes(a, setup, c, units) {
  const counts = parameterCounts(a);
  const total = counts.total;
  const linear = counts.attention + counts.mlp;
  const [layer, root] = unitParams(a);
  if (isFull(setup)) {
    const perParam = units.bf16 + (setup.fp8 ? (units.fp8 * linear) / total : 0);
    return [perParam * total, perParam * layer, units.bf16 * root];
  }
  const frozen = setup.frozen_fp32 ? units.fp32 : units.bf16;
  if (!setup.method.startsWith("qlora")) {
    const perParam = frozen + (setup.fp8 ? (units.fp8 * linear) / total : 0); // LoRA in FP8: an FP8 copy, as full's
    return [perParam * total, perParam * layer, frozen * root];
  }
  const perWeight = baseBits(setup) / 8 + quantConstantBytes(setup, c);
  const head = setup.quantized_lm_head ? counts.lmHead : 0;
  const quantised = linear + head;
  const weights = perWeight * quantised + frozen * (total - quantised);
  const layerLinear = linear / a.layers;
  const layerBytes = perWeight * layerLinear + frozen * (layer - layerLinear);
  const rootBytes = frozen * (root - head) + perWeight * head;
  return [weights, layerBytes, rootBytes];
}

// memory.estimate: the peak per GPU (the larger of the backward pass and the optimizer step), part by part.
export function estimateBreakdown(data, a, setup) {
  const est = data.estimator;
  const c = est.constants;
  const units = est.units;
  const o = est.options;
  const counts = parameterCounts(a);
  const total = counts.total;
  const n = setup.gpus;
  const shardOptimizer = ["zero1", "zero2", "zero3"].includes(setup.sharding);
  const shardGradients = ["zero2", "zero3"].includes(setup.sharding);
  const shardWeights = setup.sharding === "zero3";
  let [weights, layerBytes, rootBytes] = weightBytes(a, setup, c, units);
  const [layerParams] = unitParams(a);
  // memory.optimizer_state_bytes: bytes of state per trained parameter for weights `width` bytes wide.
  const spec = o.optimizer_states[setup.optimizer];
  const stateBytes = (width) =>
    spec.bits === null ? spec.states * width : spec.states * (spec.bits / 8 + (spec.block ? units.fp32 / spec.block : 0));
  let trainable;
  let gradients;
  let optimizer;
  let stateWidth;
  let gradWidth;
  if (isFull(setup)) {
    trainable = total;
    gradients = units.bf16 * total;
    if (setup.method === "full_amp") {
      optimizer = (units.fp32 + stateBytes(units.fp32)) * total;
      stateWidth = units.fp32;
    } else {
      optimizer = stateBytes(units.bf16) * total;
      stateWidth = units.bf16;
    }
    gradWidth = units.bf16;
  } else {
    trainable = loraTrainableParams(a, setup.lora_rank, setup.lora_targets, setup.lora_lm_head);
    weights += c.adapter_bytes * trainable;
    gradients = c.adapter_bytes * trainable;
    optimizer = stateBytes(c.adapter_bytes) * trainable;
    stateWidth = c.adapter_bytes;
    gradWidth = c.adapter_bytes;
  }
  const foreach = o.foreach_temporary.includes(setup.optimizer);
  let stepTemporary = foreach ? stateWidth * trainable : 0;
  let cpu = 0;
  if (setup.offload !== "none") {
    cpu += optimizer + units.fp32 * trainable;
    optimizer = 0;
    stepTemporary = 0;
  }
  if (setup.offload === "full") cpu += weights;
  cpu *= c.offload_cpu_buffer_factor;
  if (shardOptimizer) {
    optimizer /= n;
    stepTemporary /= n;
  }
  if (shardGradients) gradients /= n;
  const staged = setup.offload === "full" ? weights / n : 0;
  if (shardWeights) weights = setup.offload === "full" ? 0 : weights / n;
  let live = 0;
  if (shardWeights) live += rootBytes + (1 + c.zero3_prefetch_units) * layerBytes;
  if (isFull(setup) && shardGradients) live += gradWidth * layerParams;
  if (setup.method.startsWith("qlora")) {
    let largestQuantised = Math.max(...linearLayers(a).map((x) => x.inFeatures * x.outFeatures));
    if (setup.quantized_lm_head) largestQuantised = Math.max(largestQuantised, a.vocab * a.hidden);
    live += units.bf16 * largestQuantised;
  }
  const bucket = setup.sharding === "ddp" && n > 1 ? gradWidth * trainable : 0;
  const [kept, recomputed] = activationSplit(a, setup, c, units);
  const activations = kept + recomputed;
  const lossBuffers = logitsBytes(a, setup, c);
  const atPeak = recomputed > lossBuffers ? kept + recomputed : kept;
  const logits = recomputed > lossBuffers ? 0 : lossBuffers;
  const paged = o.paged.includes(setup.optimizer) ? optimizer : 0;
  const resident = weights + optimizer - paged + bucket;
  let backward;
  let step;
  let atBackward;
  if (setup.optimizer_in_backward) {
    const largest = counts.largest / (shardGradients ? n : 1);
    const held = (gradWidth + (foreach ? stateWidth : 0)) * largest;
    backward = resident + atPeak + logits + live + held;
    step = 0;
    atBackward = [weights, held, optimizer, atPeak, logits, live + bucket];
  } else {
    const carried = setup.grad_accum > 1 ? gradients : 0;
    const produced = gradients - carried;
    backward = resident + carried + live + Math.max(atPeak + logits, produced);
    step = resident + gradients + stepTemporary;
    atBackward =
      atPeak + logits >= produced
        ? [weights, carried, optimizer, atPeak, logits, live + bucket]
        : [weights, gradients, optimizer, 0, 0, live + bucket];
  }
  let phase;
  let parts;
  let transient;
  if (step > backward) {
    phase = "optimizer_step";
    parts = [weights, gradients, optimizer, 0, 0, stepTemporary + bucket];
    transient = stepTemporary;
  } else {
    phase = "backward";
    parts = atBackward;
    transient = parts[3] + parts[4] + live;
  }
  const [w, g, opt, act, lg, buffers] = parts;
  const allocated = w + g + opt - paged + act + lg + buffers;
  let cache = c.allocator_fragmentation * transient;
  if (phase === "optimizer_step") {
    const atBackwardReserved = backward + c.allocator_fragmentation * (atBackward[3] + atBackward[4] + live);
    cache = Math.max(cache, atBackwardReserved - allocated);
  }
  if (staged > allocated + cache) cache = staged - allocated;
  const context = c.cuda_context_gb * units.gb + (n > 1 ? c.nccl_buffers_gb * units.gb : 0);
  const reserved = allocated + cache;
  const card = reserved + context;
  return {
    weights: w,
    gradients: g,
    optimizer: opt,
    activations: act,
    logits: lg,
    buffers,
    cache,
    context,
    paged,
    overhead: cache + context,
    cpu,
    trainable_params: trainable,
    phase,
    backward_peak: backward,
    step_peak: step,
    saved_activations: activations,
    loss_buffers: lossBuffers,
    allocated,
    reserved,
    card,
    total: card,
  };
}

const fitsCard = (data, breakdown, memoryGb) => breakdown.card <= memoryGb * data.estimator.units.gb;

// memory.min_gpus: fewest cards the setup fits on with its sharding (the whole card), or null.
export const minGpus = (data, a, setup, memoryGb) => fewestCards(data, a, setup, memoryGb, (b) => b.card);

// memory.training_flops_per_token: 2P forward, 4P backward (2P for a frozen base), +2P with checkpointing.
export function trainingFlopsPerToken(data, paramsActive, setup) {
  const c = data.estimator.constants;
  const forward = c.forward_flops_per_param_token;
  let backward = c.train_flops_per_param_token - forward;
  if (!isFull(setup)) backward /= 2;
  const recompute = setup.grad_checkpointing ? forward : 0;
  return paramsActive * (forward + backward + recompute);
}

// ---- the time model (pipeline/estimate/step_time.py): compute + the communication compute does not hide ----

// step_time.attention_flops_per_token: the scores and their weighted sum, 2·s·d per layer forward; backward
// twice the forward, checkpointing one forward more.
export function attentionFlopsPerToken(a, setup) {
  const width = a.attention_kind === "mla" ? (a.heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim)) / 2 : a.heads * a.head_dim;
  const forward = 2 * setup.seq_len * width * a.layers;
  return forward * (3 + (setup.grad_checkpointing ? 1 : 0));
}

// step_time.flops_per_token: the weights' matmuls on the active parameters, plus the attention.
export function stepFlopsPerToken(data, a, setup, activeParams = null) {
  const active = activeParams ?? parameterCounts(a).active;
  return trainingFlopsPerToken(data, active, setup) + attentionFlopsPerToken(a, setup);
}

// step_time.peak_efficiency: full training's share of the BF16 peak, linear in log(peak) between two cards.
export function peakEfficiency(data, peak) {
  const c = data.estimator.constants;
  const [low, lowPeak] = [c.achieved_efficiency_low, c.achieved_efficiency_low_peak_tflops];
  const [high, highPeak] = [c.achieved_efficiency, c.achieved_efficiency_peak_tflops];
  if (peak <= lowPeak) return low;
  if (peak >= highPeak) return high;
  return low + (high - low) * (Math.log(peak / lowPeak) / Math.log(highPeak / lowPeak));
}

// step_time.efficiency: times LoRA's and QLoRA's factors and FP8's speed-up.
export function efficiency(data, setup, peak) {
  const c = data.estimator.constants;
  let share = peakEfficiency(data, peak);
  if (!isFull(setup)) share *= c.lora_efficiency_factor;
  if (setup.method.startsWith("qlora")) share *= c.qlora_efficiency_factor;
  if (setup.fp8) share *= c.fp8_speedup;
  return share;
}

// step_time.link_busbw_gbs: the effective bus bandwidth (GB/s) among `cards` cards of one server.
export function linkBusbw(data, gpu, link, cards = 2) {
  const c = data.estimator.constants;
  if (link === "one_card") return null;
  const oneWay = (gpu.link_gbs ?? 0) / 2;
  if (link === "nvswitch" && oneWay) return oneWay * c.nvlink_busbw_share;
  if (link === "nvlink-bridge" && oneWay && cards <= c.nvlink_bridge_max_gpus) return oneWay * c.nvlink_bridge_busbw_share;
  return c.pcie_busbw_gbs;
}

// step_time.busbw_gbs: inside one server the link's; over `nodes` servers the lower of it and the network's.
export function busbw(data, gpu, link, cards, nodes, networkGbps) {
  if (cards <= 1) return null;
  const inside = linkBusbw(data, gpu, link === "one_card" ? "pcie" : link, Math.floor(cards / nodes));
  if (nodes <= 1) return inside;
  const perGpu = networkGbps / 8 / (cards / nodes);
  const across = ((perGpu * (cards - 1)) / (nodes - 1)) * data.estimator.constants.network_busbw_share;
  return Math.min(inside, across);
}

// step_time.step_bytes: what the collectives of one optimizer step carry (an all-reduce counts twice).
export function stepBytes(data, a, setup) {
  const t = data.estimator.time;
  const counts = parameterCounts(a);
  const trainable = isFull(setup) ? counts.total : loraTrainableParams(a, setup.lora_rank, setup.lora_targets, setup.lora_lm_head);
  const grads = t.gradient_bytes * trainable;
  if (setup.sharding === "ddp" || setup.sharding === "zero1") return 2 * grads;
  if (setup.sharding === "zero2") return setup.grad_accum * grads + grads;
  const stored = (setup.method.startsWith("qlora") ? baseBits(setup) / 8 : t.stored_weight_bytes) * counts.total;
  return setup.grad_accum * (2 * stored + grads);
}

// step_time.training_time: hours of `setup` (setup.gpus cards on `nodes` servers) on `tokens` tokens;
// `share` replaces the measured efficiency when the reader gives one.
export function trainingTime(data, a, setup, gpu, tokens, link, nodes = 1, networkGbps = null, share = null) {
  const cards = setup.gpus;
  const on = cards === 1 ? "one_card" : link;
  const perToken = stepFlopsPerToken(data, a, setup);
  const peak = gpu.bf16_dense_tflops;
  // a card without an FP8 figure computes in BF16: no FP8 speed-up
  const computed = gpu.fp8_dense_tflops === null ? { ...setup, fp8: false } : setup;
  const eff = share ?? efficiency(data, computed, peak);
  const tokensPerStep = setup.micro_batch * setup.seq_len * setup.grad_accum * cards;
  const compute = (perToken * tokensPerStep) / cards / (peak * 1e12 * eff);
  const bw = busbw(data, gpu, on, cards, nodes, networkGbps);
  const communication = bw === null ? 0 : (stepBytes(data, a, setup) * (cards - 1)) / cards / (bw * 1e9);
  const exposed = Math.max(0, communication - data.estimator.constants.comm_overlap * compute);
  const steps = tokens / tokensPerStep;
  return {
    hours: (steps * (compute + exposed)) / 3600,
    hoursCompute: (steps * compute) / 3600,
    hoursCommunication: (steps * exposed) / 3600,
    efficiency: eff,
    link: nodes > 1 ? "between_servers" : on,
  };
}

// step_time.server_network_gbps: a server's declared network, all its ports; null without one.
export function serverNetworkGbps(data, server) {
  if (!server.network) return null;
  const c = data.estimator.constants;
  return c[data.estimator.time.network_rate_constants[server.network]] * c.network_ports_per_gpu * server.gpu_count;
}

// step_time.server_time: on `servers` catalog servers; null across servers with no declared network.
export function serverTime(data, a, setup, gpu, tokens, server, servers = 1, share = null) {
  const network = servers > 1 ? serverNetworkGbps(data, server) : null;
  if (servers > 1 && network === null) return null;
  const t = trainingTime(data, a, setup, gpu, tokens, data.estimator.time.server_links[server.interconnect], servers, network, share);
  return Number.isFinite(t.hours) ? t : null;
}

// lookups.TimeBand.hours: the model's time as the site shows it, divided by the published runs' speed
// factor (none with the reader's own share of the peak, which is theirs).
export function siteTime(data, t, share = null) {
  if (t === null) return null;
  const speed = share === null ? data.estimator.time.band.speed : 1;
  return { ...t, hours: t.hours / speed, hoursCompute: t.hoursCompute / speed, hoursCommunication: t.hoursCommunication / speed };
}

// lookups.TimeBand.measured: a measured run on this card and one on this link.
export function timeMeasured(data, gpuId, link) {
  const band = data.estimator.time.band;
  return band.gpus.includes(gpuId) && band.links.includes(link);
}

// ---- the recommendation (pipeline/recommend.py): the same rules, for the shown inputs ----

// memory.typical_setup: the site's typical setup for a method on `gpus` cards (ZeRO-3 on more than one).
export function typicalSetup(data, method, gpus) {
  const e = data.estimator;
  return {
    ...e.setup_defaults,
    method,
    gpus,
    sharding: gpus > 1 ? e.typical_multi_gpu_sharding : "ddp",
    offload: gpus > 1 ? e.typical_multi_gpu_offload : "none",
    lora_dropout: Boolean(e.typical_lora_dropout) && !method.startsWith("full"),
  };
}

// recommend.plan_spreads / setup_kind / reserve_gb / upper_gb: the plan's headroom.
export function planSpread(data, cards) {
  return data.estimator.plan_spreads[cards > 1 ? "card_sharded" : "card_one_gpu"] ?? null;
}
export function reserveGb(data, cards) {
  const c = data.estimator.constants;
  return cards <= 2 ? 0 : Math.max(0, c.nccl_buffers_large_group_gb - c.nccl_buffers_gb);
}
export function upperGb(data, perGpuGb, cards) {
  const spread = planSpread(data, cards);
  return spread === null ? perGpuGb : perGpuGb * spread.high_factor;
}
// recommend.fits_with_headroom.
export const fitsWithHeadroom = (data, perGpuGb, cards, memoryGb) => upperGb(data, perGpuGb, cards) + reserveGb(data, cards) <= memoryGb;
// The byte figure recommend.plan_job's search compares with the card (upper_bytes).
const upperBytes = (data, breakdown, cards) => {
  const gb = data.estimator.units.gb;
  return (upperGb(data, breakdown.total / gb, cards) + reserveGb(data, cards)) * gb;
};

// recommend.fewest_cards: the binary search with `bytes(setup)` as the need.
function fewestCards(data, a, setup, memoryGb, bytes) {
  const at = (gpus) => bytes(estimateBreakdown(data, a, { ...setup, gpus }), gpus) <= memoryGb * data.estimator.units.gb;
  if (setup.sharding === "ddp") return at(1) ? 1 : null;
  let low = 1;
  let high = data.estimator.min_gpus_limit;
  if (!at(high)) return null;
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if (at(mid)) high = mid;
    else low = mid + 1;
  }
  return low;
}

// recommend.job_cards: one card plainly, else the fewest cards (at least 2) with the multi-card setup;
// `bytes(breakdown, cards)` is the need (the whole card, or with headroom).
export function jobCards(data, a, setupOn, memoryGb, bytes = (b) => b.total) {
  if (bytes(estimateBreakdown(data, a, setupOn(1)), 1) <= memoryGb * data.estimator.units.gb) return 1;
  const found = fewestCards(data, a, setupOn(2), memoryGb, bytes);
  return found === null ? null : Math.max(found, 2);
}

// recommend.place: [reason, chassis].
export function place(count, point, headroom, network, fitsAll) {
  if (point === null) return ["does_not_fit", null];
  const chassis = headroom === null ? null : Math.ceil(headroom / count);
  if (chassis === 1 && fitsAll) return ["one_chassis", 1];
  if (chassis !== null && chassis > 1 && network) return ["several_chassis", chassis];
  if (point <= count) return ["tight", 1];
  if (chassis === null) return ["does_not_fit", null];
  return ["needs_network", chassis];
}

const REASONS = ["one_chassis", "several_chassis", "tight", "needs_network", "does_not_fit"];
const RECOMMENDED = new Set(["one_chassis", "several_chassis"]);
const PRICED = new Set(["one_chassis", "several_chassis", "tight"]);

// recommend.plan_job + recommend.ranked for one job: every server, best first.
// `setupOn(cards)` gives the setup on that many cards (the typical one, or the reader's advanced one).
export function recommendationRows(data, a, setupOn, tokens, share = null) {
  const gpus = new Map(data.gpus.map((g) => [g.id, g]));
  const gb = data.estimator.units.gb;
  const searched = new Map();
  const perGpu = new Map();
  const perGpuGb = (cards) => {
    if (!perGpu.has(cards)) perGpu.set(cards, estimateBreakdown(data, a, setupOn(cards)).total / gb);
    return perGpu.get(cards);
  };
  const fp8 = Boolean(setupOn(1).fp8);
  const rows = [];
  for (const server of [...data.servers].sort((x, y) => (x.id < y.id ? -1 : x.id > y.id ? 1 : 0))) {
    const gpu = gpus.get(server.gpu_id);
    if (fp8 && gpu.fp8_dense_tflops === null) continue; // an FP8 setup needs a card with FP8
    const size = gpu.memory_gb;
    const count = server.gpu_count;
    if (!searched.has(size)) {
      searched.set(size, [jobCards(data, a, setupOn, size), jobCards(data, a, setupOn, size, (b, cards) => upperBytes(data, b, cards))]);
    }
    const [point, headroom] = searched.get(size);
    const fitsAll = point !== null && fitsWithHeadroom(data, perGpuGb(count), count, size);
    const [reason, chassis] = place(count, point, headroom, Boolean(server.network), fitsAll);
    const cards = chassis === null ? null : chassis * count;
    let figure = null;
    let bytes = null;
    let high = null;
    let hours = null;
    let time = null;
    let headroomGb = null;
    if (cards !== null) {
      const s = setupOn(cards);
      figure = perGpuGb(cards);
      bytes = estimateBreakdown(data, a, s).total;
      const spread = planSpread(data, cards);
      high = spread === null ? null : figure * spread.high_factor;
      headroomGb = size - upperGb(data, figure, cards) - reserveGb(data, cards);
      if (reason !== "needs_network") {
        time = siteTime(data, serverTime(data, a, s, gpu, tokens, server, chassis, share), share);
        if (time !== null) {
          time.measured = timeMeasured(data, gpu.id, time.link);
          hours = time.hours;
        }
      }
    }
    let cost = null;
    let basis = null;
    let months = null;
    if (PRICED.has(reason)) {
      cost = rentalCost(data, hours, server, chassis);
      basis = "on_request";
      if (server.price_rub_hour !== null && server.price_rub_hour !== undefined) basis = "hour";
      else if (server.price_rub_month !== null) {
        basis = "month";
        months = Math.max(server.min_term_months || 1, Math.ceil(hours / data.constants.hours_per_month - 1e-9));
      }
    }
    // recommend.link_of: as the server has it.
    const link =
      cards === null || reason === "needs_network" ? null : cards === 1 ? "one_card" : chassis === 1 ? server.interconnect : server.network;
    const recommended = RECOMMENDED.has(reason);
    rows.push({ server, gpu, cards, serversCount: chassis, perGpu: figure, perGpuBytes: bytes, perGpuHigh: high, headroomGb, hours, time, cost, basis, months, link, reason, recommended });
  }
  const key = (r) => [
    r.recommended ? 0 : 1,
    r.recommended ? 0 : REASONS.indexOf(r.reason),
    r.cost === null ? 1 : 0,
    r.cost ?? 0,
    r.hours ?? Infinity,
    r.server.id,
  ];
  rows.sort((x, y) => compareKeys(key(x), key(y)));
  // recommend.rank's tied_on_cost: another recommended row costs the same.
  for (const r of rows) {
    r.tiedOnCost = r.recommended && r.cost !== null && rows.some((o) => o !== r && o.recommended && o.cost === r.cost);
  }
  return rows;
}

// The rank-1 row when it is recommended (recommend.best), else null.
export function bestRecommendation(data, a, setupOn, tokens, share = null) {
  const [first] = recommendationRows(data, a, setupOn, tokens, share);
  return first && first.recommended ? first : null;
}

// ---- the page ----

const FIELDS = ["model", "params", "method", "gpu", "server", "tokens", "epochs", "util", "cards"];
// The advanced mode's fields, named as memory.Setup's (method is the shared one above).
const COUNT_FIELDS = ["seq_len", "micro_batch", "grad_accum", "gpus", "lora_rank"];
const SELECT_FIELDS = { optimizer: "optimizers", sharding: "shardings", offload: "offloads", lora_targets: "lora_targets", loss: "losses" };
const CHECK_FIELDS = [
  "grad_checkpointing",
  "flash_attention",
  "lora_dropout",
  "lora_lm_head",
  "frozen_fp32",
  "double_quant",
  "quantized_lm_head",
  "optimizer_in_backward",
  "fp8",
];
const LORA_FIELDS = ["lora_rank", "lora_targets", "lora_dropout", "lora_lm_head", "frozen_fp32"];
const QLORA_FIELDS = ["double_quant", "quantized_lm_head"];
const PARTS = ["weights", "gradients", "optimizer", "activations", "logits", "buffers", "overhead"];

// A whole number of at least 0 as typed ("2 048" too); null otherwise.
export function parseCount(text) {
  const cleaned = String(text ?? "").replace(/[\s\u00a0\u202f]/g, "");
  return /^\d+$/.test(cleaned) ? Number(cleaned) : null;
}

// ---- Russian plural agreement: the CLDR rules of pipeline/russian.py (Babel), given to the page ----

// The CLDR operands of a number as it is shown ("1 024", "1,5"): n, i, v, w, f, t (c and e are 0).
function pluralOperands(shown) {
  const text = String(shown).replace(/[\s\u00a0\u202f]/g, "").replace(",", ".").replace(/^[−+-]/, "");
  const [whole, fraction = ""] = text.split(".");
  const trimmed = fraction.replace(/0+$/, "");
  return {
    n: Math.abs(Number(text)),
    i: Number(whole),
    v: fraction.length,
    w: trimmed.length,
    f: fraction ? Number(fraction) : 0,
    t: trimmed ? Number(trimmed) : 0,
    c: 0,
    e: 0,
  };
}

function pluralValue(node, ops) {
  const [kind, args] = node;
  if (kind === "value") return args[0];
  if (kind === "mod") return pluralValue(args[0], ops) % pluralValue(args[1], ops);
  return ops[kind];
}

function pluralTest(node, ops) {
  const [kind, args] = node;
  if (kind === "and") return pluralTest(args[0], ops) && pluralTest(args[1], ops);
  if (kind === "or") return pluralTest(args[0], ops) || pluralTest(args[1], ops);
  if (kind === "not") return !pluralTest(args[0], ops);
  // relation: ["in" | "within", expression, ["range_list", [[low, high], ...]]]
  const [method, expression, [, ranges]] = args;
  const value = pluralValue(expression, ops);
  if (method === "in" && !Number.isInteger(value)) return false;
  return ranges.some(([low, high]) => value >= pluralValue(low, ops) && value <= pluralValue(high, ops));
}

// The CLDR category ("one", "few", "many", "other") of a number as shown.
export function pluralCategory(plural, shown) {
  const ops = pluralOperands(shown);
  for (const [category, rule] of plural.rules) if (pluralTest(rule, ops)) return category;
  return "other";
}

const PLURAL_CATEGORIES = ["one", "few", "many", "other"];

// A shown number with its noun in agreement, as pipeline/russian.count writes it: "5 карт".
export function countNoun(plural, shown, noun, grammaticalCase = "nom") {
  const forms = plural.nouns[noun][grammaticalCase];
  return `${shown}${NBSP}${forms[PLURAL_CATEGORIES.indexOf(pluralCategory(plural, shown))]}`;
}

// A text with its slots filled: "{key}" is the slot; "{key:noun}" or "{key:noun/case}" the slot's
// number with its noun in agreement (pipeline/render/russian.py's fill). `plural` is calculator.json's.
export const fillText = (plural, template, slots) =>
  template.replace(/\{(\w+)(?::([^}/]+)(?:\/(\w+))?)?\}/g, (_, key, noun, grammaticalCase) =>
    noun && plural && slots[key] !== undefined
      ? countNoun(plural, slots[key], noun, grammaticalCase || "nom")
      : (slots[key] ?? ""),
  );

let pluralData = null; // set from data/calculator.json
const fill = (template, slots) => fillText(pluralData, template, slots);

function element(tag, attributes = {}, text = "") {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  node.textContent = text;
  return node;
}

function setup(form, data, text) {
  tolerance = data.ceil_relative_tolerance;
  pluralData = data.plural;
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
  const est = data.estimator;
  for (const [name, list] of Object.entries(SELECT_FIELDS)) {
    field(name).append(...est.options[list].map((id) => element("option", { value: id }, text[`${name}_${id}`])));
  }
  const defaults = est.setup_defaults;
  for (const name of COUNT_FIELDS) field(name).value = String(defaults[name]);
  for (const name of Object.keys(SELECT_FIELDS)) field(name).value = defaults[name];
  for (const name of CHECK_FIELDS) field(name).checked = defaults[name];
  $("adv-fp8-gpus").textContent = data.gpus
    .filter((g) => g.fp8_dense_tflops !== null)
    .map((g) => g.name)
    .join(", ");
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
  field("advanced").checked = query.get("advanced") === "1";
  for (const name of [...COUNT_FIELDS, ...Object.keys(SELECT_FIELDS)]) {
    const value = query.get(name);
    const input = field(name);
    if (value === null) continue;
    if (input.tagName !== "SELECT" || [...input.options].some((o) => o.value === value)) input.value = value;
  }
  for (const name of CHECK_FIELDS) {
    if (query.get(name) === "1" || query.get(name) === "0") field(name).checked = query.get(name) === "1";
  }

  // The one-line answer: the recommendations table's row for the chosen model x method (the same line as
  // the model pages); the page opens on site.toml's calculator_opens_with when the link names no model.
  const headlines = JSON.parse(document.getElementById("calc-headlines")?.textContent ?? '{"jobs":{}}');
  if (!query.has("model") && headlines.opens_with) {
    modelSelect.value = headlines.opens_with[0];
    if (!query.has("method")) field("method").value = headlines.opens_with[1];
  }
  // The settings the reader changed from the typical setup (advanced mode), by their labels, with values.
  function changedSettings() {
    const changed = [];
    if (!field("advanced").checked) return changed;
    const label = (name) => field(name).labels[0]?.textContent.trim() ?? name;
    for (const name of [...COUNT_FIELDS, ...Object.keys(SELECT_FIELDS)]) {
      const input = field(name);
      if (!applies(name) || input.value.trim() === String(defaults[name])) continue;
      const shown = input.tagName === "SELECT" ? (input.selectedOptions[0]?.textContent ?? input.value) : input.value.trim();
      changed.push(`${label(name)}: ${shown}`);
    }
    for (const name of CHECK_FIELDS) {
      if (applies(name) && field(name).checked !== defaults[name]) changed.push(`${label(name)}: ${field(name).checked ? text.yes : text.no}`);
    }
    return changed;
  }

  // The model as the reader gave it: a catalog name, a custom size, or a pasted config.json.
  function modelName(p) {
    const config = field("advanced").checked ? pastedConfig() : null;
    if (config && config.arch) return fill(text.model_config, { params: formatNumber(parameterCounts(config.arch).total / 1e9, 2) });
    if (modelSelect.value === "custom") return fill(text.model_custom_name, { params: p === null ? "?" : formatGb(p) });
    return modelById.get(modelSelect.value).name;
  }

  // The headline: the plan for the inputs on the screen. For a catalog model in the typical setup it is the
  // recommendations table's line (rendered into the page); otherwise the same rules computed here, with what
  // changed against the typical setup and by how much.
  function renderHeadline(reco, p) {
    const key = `${modelSelect.value}|${field("method").value}`;
    const job = headlines.jobs[key];
    const line = $("calc-headline");
    if (!line) return;
    const changed = changedSettings();
    const config = field("advanced").checked ? pastedConfig() : null;
    const typedTime = field("tokens").value.trim() !== "" || parsePositive(field("util").value) !== null;
    const typical = Boolean(job) && changed.length === 0 && !(config && config.arch) && !typedTime;
    const method = data.methods.find((m) => m.id === field("method").value);
    if (typical) line.textContent = job;
    else if (reco) line.textContent = fill(R.headline, { method: method.short_name, model: modelName(p), line: reco.line });
    else line.textContent = text.headline_custom;
    const note = $("calc-headline-changed");
    note.hidden = changed.length === 0 && !typedTime;
    note.textContent = "";
    if (!note.hidden && reco && job && modelSelect.value !== "custom" && !(config && config.arch)) {
      const arch = est.architectures[modelSelect.value];
      const usual = planFor(arch, (cards) => typicalSetup(data, method.id, cards), data.estimator.typical_tokens, null);
      const mine = reco.best ?? reco.tight;
      const theirs = usual.best ?? usual.tight;
      const summary = (row) =>
        row === null
          ? R.none
          : fill(text.headline_plan, {
              cards: formatInteger(row.cards),
              gpu: row.gpu.name,
              server: row.server.name,
              gb: formatGb(row.perGpu),
              cost: row.cost === null ? text.price_on_request : `${formatInteger(Math.round(row.cost))} ₽`,
              hours: formatNumber(row.hours, 1),
            });
      note.textContent = fill(text.headline_changed, {
        fields: [...changed, ...(typedTime ? [text.headline_time_typed] : [])].join("; "),
        typical: summary(theirs),
        yours: summary(mine),
      });
    } else if (!note.hidden) {
      note.textContent = fill(text.headline_changed_custom, { fields: changed.join("; ") || text.headline_time_typed });
    }
    $("calc-quote").href = quoteLink(reco, p, changed, method);
    $("calc-download").hidden = false;
    $("calc-copy").hidden = !navigator.clipboard;
  }

  // «Запросить КП» carries the screen: the model (or custom size or config), the method, every changed
  // setting, the plan (server, cards, per-card figure with its upper end and the card's memory, price, time).
  function quoteLink(reco, p, changed, method) {
    const lines = [[R.q_model, modelName(p)], [R.q_method, method.name]];
    if (changed.length) lines.push([R.q_changed, changed.join("; ")]);
    else lines.push([R.q_setup, text.quote_setup_typical]);
    const typedTokens = parsePositive(field("tokens").value);
    if (typedTokens !== null) lines.push([R.q_tokens, fill(text.quote_tokens, { tokens: formatNumber(typedTokens, 0), epochs: formatNumber(parsePositive(field("epochs").value) ?? 1, 0) })]);
    if (reco) {
      lines.push([R.q_plan, reco.line]);
      const row = reco.best ?? reco.tight;
      if (row && row.perGpuHigh !== null)
        lines.push([R.q_headroom, fill(text.quote_headroom, { gb: formatGb(row.perGpu), high: formatGb(row.perGpuHigh), memory: formatGb(row.gpu.memory_gb) })]);
    }
    lines.push([R.q_page, window.location.href]);
    const subject = fill(R.q_subject, { what: modelName(p) });
    const contacts = $("calc-quote").dataset;
    if (contacts.form) {
      const query = new URLSearchParams([["subject", subject], ...lines]);
      return contacts.form + (contacts.form.includes("?") ? "&" : "?") + query.toString();
    }
    const body = lines.map(([name, value]) => `${name}: ${value}`).join("\n");
    return `mailto:${contacts.email}?subject=${encodeURIComponent(subject)}&body=${encodeURIComponent(body)}`;
  }
  $("calc-copy")?.addEventListener("click", async () => {
    await navigator.clipboard.writeText(window.location.href);
    $("calc-copied").hidden = false;
  });

  const isFullMethod = () => field("method").value.startsWith("full");
  // Fields that do not apply to the chosen method are hidden, keep the defaults and stay out of the URL.
  const isQloraMethod = () => field("method").value.startsWith("qlora");
  const applies = (name) =>
    LORA_FIELDS.includes(name) ? !isFullMethod() : name === "fp8" ? !isQloraMethod() : QLORA_FIELDS.includes(name) ? isQloraMethod() : true;

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
    if (field("advanced").checked) {
      state.set("advanced", "1");
      for (const name of [...COUNT_FIELDS, ...Object.keys(SELECT_FIELDS)]) {
        const value = field(name).value.trim();
        const count = COUNT_FIELDS.includes(name) ? parseCount(value) : null;
        const shown = count === null ? value : String(count);
        if (applies(name) && shown !== String(defaults[name])) state.set(name, shown);
      }
      for (const name of CHECK_FIELDS) {
        if (applies(name) && field(name).checked !== defaults[name]) state.set(name, field(name).checked ? "1" : "0");
      }
    }
    const search = state.toString();
    window.history.replaceState(null, "", search ? `?${search}` : window.location.pathname);
  }

  function paramsB() {
    if (modelSelect.value !== "custom") return modelById.get(modelSelect.value).params_b;
    return parsePositive(field("params").value);
  }

  // The advanced inputs as a memory.Setup; the labels of fields that are not whole numbers.
  function readSetup() {
    const values = { method: field("method").value };
    const invalid = [];
    for (const name of COUNT_FIELDS) {
      const count = applies(name) ? parseCount(field(name).value) : defaults[name];
      field(name).setAttribute("aria-invalid", String(count === null));
      if (count === null) invalid.push(field(name).labels[0].textContent);
      values[name] = count;
    }
    for (const name of Object.keys(SELECT_FIELDS)) values[name] = applies(name) ? field(name).value : defaults[name];
    for (const name of CHECK_FIELDS) values[name] = applies(name) ? field(name).checked : defaults[name];
    return { setup: values, invalid };
  }

  // The pasted config.json: { arch } when it reads, { error } (a ConfigError) when not, null when the field is empty.
  function pastedConfig() {
    const value = field("config").value.trim();
    if (!value) return null;
    try {
      return { arch: parseConfigText(data, value) };
    } catch (error) {
      if (error instanceof ConfigError) return { error };
      throw error;
    }
  }

  // The named model whose shape the estimate borrows (a custom size or a generic one), null for a model with its own.
  function borrowedShape(p) {
    if (modelSelect.value === "custom") return p === null ? null : nearestReference(data, p);
    return est.borrowed_shapes[modelSelect.value] ?? null;
  }

  function showConfig(config, p) {
    const note = $("calc-config-note");
    const problem = $("calc-config-error");
    const borrowed = config ? null : borrowedShape(p);
    note.hidden = !(config && config.arch) && !borrowed;
    if (borrowed) {
      const a = architectureOf(p);
      note.textContent = fill(text.shape_borrowed, {
        name: modelById.get(borrowed)?.name ?? borrowed,
        layers: formatInteger(a.layers),
        hidden: formatInteger(a.hidden),
        vocab: formatInteger(a.vocab),
      });
    }
    problem.hidden = !(config && config.error);
    field("config").setAttribute("aria-invalid", String(Boolean(config && config.error)));
    if (config && config.error) problem.textContent = fill(text[config.error.code], config.error.values);
    if (config && config.arch) {
      const a = config.arch;
      const moe = a.experts ? fill(text.config_moe, { experts: formatInteger(a.experts), per_token: formatInteger(a.experts_per_token) }) : "";
      note.textContent = fill(text.config_used, {
        layers: formatInteger(a.layers),
        hidden: formatInteger(a.hidden),
        heads: formatInteger(a.heads),
        kv_heads: formatInteger(a.kv_heads),
        vocab: formatInteger(a.vocab),
        moe,
        params: formatNumber(parameterCounts(a).total / 1e9, 2),
      });
    }
  }

  function architectureOf(p) {
    const config = pastedConfig();
    if (config) return config.arch ?? null;
    if (modelSelect.value === "custom") return customArchitecture(data, p);
    return est.architectures[modelSelect.value];
  }

  // The advanced mode's outputs; returns what the time block needs, or null when there are no numbers.
  function renderAdvanced(p, tableEstimate) {
    const on = field("advanced").checked;
    $("calc-advanced").hidden = !on;
    $("adv-result").hidden = !on || p === null;
    $("time-advanced-help").hidden = !on;
    $("calc-cards-help").textContent = on ? text.time_cards_advanced : text.time_cards_auto;
    for (const node of form.querySelectorAll(".calc-lora")) node.hidden = isFullMethod();
    $("calc-fp8").closest(".calc-field").hidden = isQloraMethod();
    $("calc-double-quant").closest(".calc-field").hidden = !isQloraMethod();
    $("calc-quantized-lm-head").closest(".calc-field").hidden = !isQloraMethod();
    const result = $("adv-result");
    const config = on ? pastedConfig() : null;
    showConfig(config, p);
    if (!on || p === null) {
      delete result.dataset.raw;
      return null;
    }
    if (config && config.error) {
      $("adv-problems").hidden = true;
      $("adv-output").hidden = true;
      result.dataset.raw = JSON.stringify({ config_error: config.error.code, values: config.error.values });
      return null;
    }
    const { setup, invalid } = readSetup();
    const problems = invalid.length ? [] : setupProblems(data, setup);
    const messages = [...invalid.map((label) => fill(text.not_integer, { label })), ...problems.map((code) => text[code])];
    $("adv-problem-list").replaceChildren(...messages.map((m) => element("li", {}, m)));
    $("adv-problems").hidden = messages.length === 0;
    $("adv-output").hidden = messages.length > 0;
    const batch = invalid.length ? null : setup.micro_batch * setup.grad_accum * setup.gpus;
    $("adv-batch").textContent =
      batch === null
        ? ""
        : fill(text.effective_batch, {
            micro: formatInteger(setup.micro_batch),
            accum: formatInteger(setup.grad_accum),
            gpus: formatInteger(setup.gpus),
            batch: formatInteger(batch),
            seq: formatInteger(setup.seq_len),
            tokens: formatInteger(batch * setup.seq_len),
          });
    if (messages.length) {
      result.dataset.raw = JSON.stringify({ problems: invalid.length ? ["not_integer"] : problems });
      return null;
    }

    const arch = architectureOf(p);
    if (!arch) {
      // No model of the catalog has a published architecture to shape a custom size from.
      $("adv-output").hidden = true;
      return null;
    }
    const gb = est.units.gb;
    const breakdown = estimateBreakdown(data, arch, setup);
    $("adv-total").textContent = formatGb(breakdown.total / gb);
    $("adv-total-cell").textContent = formatGb(breakdown.total / gb);
    $("adv-phase").textContent = text[`phase_${breakdown.phase}`];
    $("adv-allocated").textContent = formatGb(breakdown.allocated / gb);
    $("adv-reserved").textContent = formatGb(breakdown.reserved / gb);
    $("adv-card").textContent = formatGb(breakdown.card / gb);
    $("adv-bar").replaceChildren(
      ...PARTS.filter((part) => breakdown[part] > 0).map((part) => {
        const label = fill(text.bar_label, { name: text[`part_${part}`], gb: formatGb(breakdown[part] / gb) });
        const segment = element("div", { class: `adv-segment adv-${part}`, title: label, "data-part": part });
        segment.style.width = `${(breakdown[part] / breakdown.total) * 100}%`;
        segment.append(element("span", {}, fill(text.bar_segment, { gb: formatGb(breakdown[part] / gb) })));
        return segment;
      }),
    );
    $("adv-parts").tBodies[0].replaceChildren(
      ...PARTS.map((part) => {
        const row = element("tr", { "data-part": part });
        const name = element("th", { scope: "row" });
        name.append(element("span", { class: `adv-swatch adv-${part}`, "aria-hidden": "true" }), text[`part_${part}`]);
        row.append(
          name,
          element("td", { class: "num", "data-cell": "gb" }, formatGb(breakdown[part] / gb)),
          element("td", { class: "num" }, formatNumber((breakdown[part] / breakdown.total) * 100, 0)),
        );
        return row;
      }),
    );
    $("adv-cpu-row").hidden = breakdown.cpu === 0;
    $("adv-cpu").textContent = formatGb(breakdown.cpu / gb);
    $("adv-trainable").textContent = fill(text.trainable, { count: formatNumber(breakdown.trainable_params / 1e6, 1) });
    $("adv-table-rule").textContent = fill(text.table_rule, {
      memory: formatGb(tableEstimate.memory),
      low: formatGb(tableEstimate.low),
      high: formatGb(tableEstimate.high),
    });

    // GPUs: fits at the chosen number of cards, and the fewest cards (memory.min_gpus); FP8 needs a card with FP8.
    const noFp8 = (g) => setup.fp8 && g.fp8_dense_tflops === null;
    const gpus = {};
    $("adv-gpus-count").textContent = formatInteger(setup.gpus);
    $("adv-gpus").tBodies[0].replaceChildren(
      ...data.gpus.map((g) => {
        const fits = !noFp8(g) && fitsCard(data, breakdown, g.memory_gb);
        const fewest = noFp8(g) ? null : minGpus(data, arch, setup, g.memory_gb);
        gpus[g.id] = { fits, min_gpus: fewest };
        const row = element("tr", { "data-gpu": g.id });
        row.append(
          element("th", { scope: "row" }, g.name),
          element("td", { class: "num" }, formatGb(g.memory_gb)),
          element("td", { "data-cell": "fits" }, noFp8(g) ? text.no_fp8 : fits ? text.yes : text.no),
          element("td", { class: "num", "data-cell": "min_gpus" }, fewest === null ? (noFp8(g) ? text.no_fp8 : text.never) : formatInteger(fewest)),
        );
        return row;
      }),
    );

    const flopsPerToken = trainingFlopsPerToken(data, parameterCounts(arch).active, setup);
    const raw = {
      problems: [],
      breakdown,
      gpus,
      servers: [], // the plan's servers (renderRecommendation)
      table_memory: tableEstimate.memory,
      flops_per_token: flopsPerToken,
      layers: arch.layers,
    };
    if (config && config.arch) raw.config_architecture = arch;
    result.dataset.raw = JSON.stringify(raw);
    return { setup, flopsPerToken, raw };
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
      renderAdvanced(null, null);
      renderTime(null, null, gpu, server, null);
      renderHeadline(null, p);
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
        const size = { lower: est.lower, upper: est.upper, size: est.lower ?? est.upper }[slot.dataset.slot];
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

    // A catalog of hundreds of servers shows the cheapest site.toml table_page_rows, as the comparison pages do.
    const fitting = fittingServers(data, est);
    const more = $("out-servers-more");
    more.hidden = fitting.length <= text.servers_rows;
    more.textContent = more.hidden ? "" : fill(text.servers_shown, { shown: formatInteger(text.servers_rows), total: formatInteger(fitting.length) });
    // As the site's tables (view.TALL_MIN_ROWS): a long one scrolls in a box of its own.
    $("out-servers-wrap").classList.toggle("tall", Math.min(fitting.length, text.servers_rows) >= text.tall_rows);
    $("out-servers").tBodies[0].replaceChildren(
      ...fitting.slice(0, text.servers_rows).map((r) => {
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
    const advanced = renderAdvanced(p, est);
    const reco = renderRecommendation(p, advanced);
    renderHeadline(reco, p);
    renderTime(p, est, gpu, server, advanced);
    renderDownload();
  }

  // «Скачать расчёт»: every figure shown — the headline, each shown value (by its element id) and each
  // row of the shown tables — as a CSV the reader saves.
  function renderDownload() {
    // A value as the reader sees it: the template's line breaks and indents become single spaces.
    const plain = (node) => node.textContent.replace(/[ \t\r\n]+/g, " ").trim();
    const shown = (node) => node.closest("[hidden]") === null && node.closest("details:not([open]) > :not(summary)") === null;
    const rows = [["part", "item", "value"], ["headline", modelSelect.value + "|" + field("method").value, $("calc-headline").textContent]];
    for (const node of form.parentElement.querySelectorAll('span[id^="out-"], span[id^="adv-"], strong[id^="adv-"], td[id^="adv-"]')) {
      if (shown(node) && node.children.length === 0 && plain(node)) rows.push(["figure", node.id, plain(node)]);
    }
    for (const table of form.querySelectorAll("table")) {
      if (!shown(table)) continue;
      for (const row of table.tBodies[0].rows) rows.push([table.id, ...[...row.cells].map(plain)]);
    }
    const csv = rows.map((r) => r.map((v) => `"${spreadsheetSafe(String(v ?? "")).replace(/"/g, '""')}"`).join(",")).join("\r\n");
    $("calc-download").href = `data:text/csv;charset=utf-8,${encodeURIComponent("\ufeff" + csv)}`;
  }

  // The setup the shown figures are for: the typical one (simple mode) or the reader's (advanced mode), on `cards` cards.
  // On more cards than entered the reader's setup is sharded as the recommendation shards (its own ZeRO,
  // else the typical multi-GPU sharding); on one card it is plain DDP (estimate_cli._setup_on).
  function setupOn(cards) {
    if (!field("advanced").checked) return typicalSetup(data, field("method").value, cards);
    const { setup, invalid } = readSetup();
    if (invalid.length || setupProblems(data, setup).length) return null;
    if (cards === setup.gpus) return setup;
    if (cards === 1) return { ...setup, gpus: 1, sharding: "ddp", offload: "none" };
    if (setup.sharding === "ddp") {
      const typical = typicalSetup(data, setup.method, cards);
      return { ...setup, gpus: cards, sharding: typical.sharding, offload: typical.offload };
    }
    return { ...setup, gpus: cards };
  }

  // The plan for the shown inputs, by recommend.py's rules (for a catalog model in the typical setup the
  // same row as data/recommendations.csv): the headline, the first-principles figure on the plan's cards
  // with its measured range, and the recommendation line all come from it.
  let shownReco = null;
  const R = text.reco;
  function linkText(row) {
    return row.link === "pcie" ? R[row.gpu.has_nvlink ? "link_pcie" : "link_pcie_only"] : (R[`link_${row.link}`] ?? row.link ?? "");
  }
  function costText(row) {
    const cost =
      row.basis === "hour"
        ? fill(R.cost_hour, { cost: formatInteger(Math.round(row.cost)), price: formatInteger(row.server.price_rub_hour) })
        : row.basis === "month"
          ? fill(R.cost_month, { cost: formatInteger(Math.round(row.cost)), months: formatInteger(row.months) })
          : text.price_on_request;
    return row.tiedOnCost ? `${cost} (${R.tied})` : cost;
  }
  // articles.time_words: hours as compute + exposed communication, the measured range, what dominates.
  // `withHours` false: what follows the hours where the page shows them on their own (the time block).
  function timeText(row, withHours = true, band = data.estimator.time.band) {
    const t = row.time;
    if (!t) return "—";
    const over = R[`over_${row.link}`] ?? R.over_network;
    let split;
    if (t.link === "one_card") split = R.time_one_card;
    else if (t.hoursCommunication <= 0) split = fill(R.time_hidden, { over });
    else
      split = fill(R.time_split, {
        compute: formatNumber(t.hoursCompute, 1),
        communication: formatNumber(t.hoursCommunication, 1),
        over,
        dominant: t.hoursCommunication > t.hoursCompute ? R.dominant_communication : R.dominant_compute,
      });
    const range = band.low === null ? "" : fill(R.time_range, { low: formatNumber(t.hours * band.low, 1), high: formatNumber(t.hours * band.high, 1) });
    const line = withHours ? fill(R.time, { hours: formatNumber(t.hours, 1), range, split }) : fill(R.time_after, { range, split });
    return t.measured ? line : line + R.time_draft;
  }
  // entities.plan_text: the recommendation's line; without one, a tight server as a risk; else none.
  function planLine(best, tight, tokens) {
    if (best)
      return fill(R.line, {
        cards: formatInteger(best.cards),
        gpu: best.gpu.name,
        server: best.server.name,
        link: linkText(best),
        cost: costText(best),
        time: timeText(best),
        tokens: formatNumber(tokens / 1e9, 2),
      });
    if (tight)
      return fill(R.tight_line, {
        cards: formatInteger(tight.cards),
        gpu: tight.gpu.name,
        server: tight.server.name,
        high: formatGb(tight.perGpuHigh ?? tight.perGpu),
        memory: formatGb(tight.gpu.memory_gb),
      });
    return R.none;
  }
  function planFor(arch, on, tokens, share) {
    const rows = recommendationRows(data, arch, on, tokens, share);
    const best = rows[0] && rows[0].recommended ? rows[0] : null;
    const tight = best ? null : (rows.find((r) => r.reason === "tight") ?? null);
    return { rows, best, tight };
  }
  // The advanced mode's servers: the plan's rows that hold the job (recommended, then the risks), best first.
  function renderPlanServers(rows, advanced) {
    const gb = data.estimator.units.gb;
    const shown = rows.filter((r) => r.recommended || r.reason === "tight");
    $("adv-servers").tBodies[0].replaceChildren(
      ...shown.map((r) => {
        const row = element("tr", { "data-server": r.server.id, "data-reason": r.reason });
        const cards = fill(text.server_cards, { count: formatInteger(r.cards), gpu: r.gpu.name });
        row.append(
          element("th", { scope: "row" }, r.server.name),
          element("td", {}, r.reason === "tight" ? `${cards} — ${R.tight}` : cards),
          element("td", { class: "num", "data-cell": "per_card" }, formatGb(r.perGpuBytes / gb)),
          element("td", { class: "num" }, r.cost === null ? text.price_on_request : `${formatInteger(Math.round(r.cost))} ₽`),
        );
        return row;
      }),
    );
    $("adv-servers-wrap").hidden = shown.length === 0;
    $("adv-servers-none").hidden = shown.length > 0;
    if (advanced) {
      advanced.raw.servers = shown.map((r) => [r.server.id, r.perGpuBytes]);
      $("adv-result").dataset.raw = JSON.stringify(advanced.raw);
    }
  }

  function renderRecommendation(p, advanced) {
    const arch = architectureOf(p);
    const advancedOn = field("advanced").checked;
    const valid = arch ? setupOn(1) : null;
    $("out-fp-row").hidden = valid === null;
    $("out-reco-row").hidden = true;
    $("out-reco-none").hidden = true;
    shownReco = null;
    if (valid === null) return null;
    const tokensM = parsePositive(field("tokens").value);
    const epochs = parsePositive(field("epochs").value);
    const utilPct = parsePositive(field("util").value);
    const tokens = tokensM === null ? data.estimator.typical_tokens : tokensM * 1e6 * (epochs ?? 1);
    const share = utilPct === null ? null : utilPct / 100;
    const plan = planFor(arch, setupOn, tokens, share);
    const { best, tight } = plan;
    // The per-card figure is the plan's: on its cards (the risk's, else the cards entered).
    const cards = best ? best.cards : tight ? tight.cards : advancedOn ? readSetup().setup.gpus : 1;
    const base = setupOn(cards);
    const gb = data.estimator.units.gb;
    const fp = estimateBreakdown(data, arch, base).total / gb;
    $("out-fp-memory").textContent = formatGb(fp);
    // recommend.plan_spreads: the range measured for this kind of setup (one card / sharded).
    const spread = planSpread(data, cards);
    $("out-fp-range").hidden = spread === null;
    if (spread !== null) {
      $("out-fp-low").textContent = formatGb(fp * spread.low_factor);
      $("out-fp-high").textContent = formatGb(fp * spread.high_factor);
    }
    $("out-fp-cards").textContent = formatInteger(cards);
    if (advancedOn) renderPlanServers(plan.rows, advanced);
    const line = planLine(best, tight, tokens);
    shownReco = { fp, best, tight, tokens, share, setup: base, line, plan };
    if (best === null) {
      $("out-reco-none").hidden = false;
      $("out-reco-none").textContent = fill(text.reco_none, { line });
    } else {
      $("out-reco").textContent = line;
      $("out-reco-row").hidden = false;
    }
    return shownReco;
  }

  // Whether the job spans several servers with no declared network between them (then it is said, unpriced).
  function showNoNetwork(servers, server) {
    const unjoined = server !== null && servers !== null && servers > 1 && !server.network;
    $("out-cost-network").hidden = !unjoined;
    if (unjoined) $("out-cost-servers").textContent = formatInteger(servers);
    return unjoined;
  }

  // The time model (step_time.py): on the chosen server's cards (whole servers), or else on the chosen GPU.
  function renderTime(p, est, gpu, server, advanced) {
    const tokensM = parsePositive(field("tokens").value);
    const epochs = parsePositive(field("epochs").value);
    const utilPct = parsePositive(field("util").value);
    const share = utilPct === null ? null : utilPct / 100;
    const timeGpu = server ? gpuById.get(server.gpu_id) : gpu;
    const advancedOn = field("advanced").checked;
    const arch = p === null ? null : architectureOf(p);
    const ready = p !== null && arch && tokensM !== null && epochs !== null && timeGpu && (!advancedOn || advanced !== null);
    $("time-empty").hidden = Boolean(ready);
    $("time-output").hidden = !ready;
    if (!ready) return;
    const typedCards = parsePositive(field("cards").value);
    $("out-fp8-gpu").hidden = !(advancedOn && advanced.setup.fp8 && timeGpu.fp8_dense_tflops === null);
    $("out-fp8-gpu").textContent = fill(text.fp8_gpu_missing, { name: timeGpu.name });
    let cards;
    let setup;
    if (advancedOn) {
      cards = typedCards === null ? advanced.setup.gpus : Math.ceil(typedCards);
      const sharding = cards > 1 && advanced.setup.gpus === 1 ? data.estimator.typical_multi_gpu_sharding : advanced.setup.sharding;
      setup = { ...advanced.setup, gpus: cards, sharding };
    } else {
      const autoCards = server ? server.gpu_count * serverFit(server, est).count : gpuFit(timeGpu, est).cards;
      cards = typedCards === null ? autoCards : Math.ceil(typedCards);
      setup = typicalSetup(data, field("method").value, cards);
    }
    const tokens = tokensM * 1e6 * epochs;
    const servers = server ? Math.ceil(cards / server.gpu_count) : null;
    const time = siteTime(
      data,
      server
        ? serverTime(data, arch, setup, timeGpu, tokens, server, servers, share)
        : trainingTime(data, arch, setup, timeGpu, tokens, data.estimator.time.card_links[timeGpu.interconnect] ?? "pcie", 1, null, share),
      share,
    );
    // Several servers without a declared network: not recommended, no time and no total price (recommend.priced).
    const unjoined = showNoNetwork(servers, server);
    $("out-time-gpu").textContent = fill(text.time_gpu, { name: timeGpu.name, cards: formatInteger(cards) });
    $("out-hours").textContent = time === null ? "—" : formatNumber(time.hours, 1);
    if (time !== null) time.measured = timeMeasured(data, timeGpu.id, time.link);
    const row = { time, link: server ? (servers > 1 ? server.network : server.interconnect) : data.estimator.time.card_links[timeGpu.interconnect] };
    $("out-time-split").textContent = time === null ? "" : timeText(row, false); // no network: said below
    const cost = time === null || server === null ? null : rentalCost(data, time.hours, server, servers);
    $("out-cost-row").hidden = cost === null;
    $("out-cost-na").hidden = cost !== null || unjoined;
    if (cost !== null) {
      $("out-time-servers").textContent = fill(text.time_servers, { count: formatInteger(servers), name: server.name });
      $("out-cost").textContent = formatNumber(cost, 0);
    }
    if (advancedOn) {
      const result = $("adv-result");
      const hours = time === null ? null : time.hours;
      result.dataset.raw = JSON.stringify({ ...advanced.raw, cards, flops: advanced.flopsPerToken * tokens, hours, cost });
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

// Outside a browser (a test importing the functions) there is no page to set up.
const form = globalThis.document?.getElementById("calc");
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
