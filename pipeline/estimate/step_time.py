"""Training time = compute + exposed communication, per optimizer step (docs/estimator.md, "Training time").

Compute: FLOPs per token by method (`training_flops_per_token`: 2P forward, 4P backward for full training,
2P for LoRA/QLoRA whose frozen weights need only the activation gradients, +2P forward again under
gradient checkpointing) on the active parameters, plus the attention scores at the run's context length,
at an achieved share of the card's dense BF16 peak that depends on the method (and FP8's measured speed-up).

Communication per optimizer step, ring collectives of S bytes over n ranks taking S·(n−1)/n ÷ bus
bandwidth (all-reduce twice that; nccl-tests' busbw): DDP/ZeRO-1 all-reduce the trainable gradients once
per step; ZeRO-2 reduce-scatters them every micro-batch and all-gathers the updated weights once;
ZeRO-3/FSDP all-gathers every stored weight in the forward and again in the backward of every micro-batch
(LoRA's frozen weights too; a MoE moves all its experts) and reduce-scatters the trainable gradients.
The bus bandwidth is the link's effective one: NVSwitch, an NVLink bridge, PCIe through the host, and
between servers the declared network. Communication hides under compute up to `comm_overlap` of it.

Pure functions; every tunable number is a constant of constants.csv (`TIME_CONSTANTS`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from pipeline.estimate import first_principles
from pipeline.estimate.architecture import Architecture, lora_trainable_params, parameter_counts

# The constants the time model reads from constants.csv.
TIME_CONSTANTS = (
    "achieved_efficiency",
    "achieved_efficiency_peak_tflops",
    "achieved_efficiency_low",
    "achieved_efficiency_low_peak_tflops",
    "lora_efficiency_factor",
    "qlora_efficiency_factor",
    "fp8_speedup",
    "compile_speedup",
    "nvlink_busbw_share",
    "nvlink_bridge_busbw_share",
    "nvlink_bridge_max_gpus",
    "pcie_busbw_gbs",
    "network_busbw_share",
    "comm_overlap",
    "forward_flops_per_param_token",
    "train_flops_per_param_token",
)

# How the cards of one server talk: servers.csv's `interconnect`, and one card alone.
LINKS = ("one_card", "nvswitch", "nvlink-bridge", "pcie")
# A card's own link (gpus.csv `interconnect`) as the link of a server full of such cards.
CARD_LINKS = {"nvlink": "nvswitch", "infinity-fabric": "nvswitch", "nvlink-bridge": "nvlink-bridge", "pcie": "pcie"}
# A server's interconnect (servers.csv) as the link of the time model: Infinity Fabric joins every card to
# every other at the card's link rate, as NVSwitch does.
SERVER_LINKS = {"nvswitch": "nvswitch", "infinity-fabric": "nvswitch", "nvlink-bridge": "nvlink-bridge", "pcie": "pcie"}
# The constants giving each declared inter-node network's line rate per port (servers.network).
NETWORK_RATE_CONSTANTS = {
    "infiniband-ndr": "network_port_gbps_infiniband_ndr",
    "infiniband-hdr": "network_port_gbps_infiniband_hdr",
    "roce-400": "network_port_gbps_roce_400",
    "roce-200": "network_port_gbps_roce_200",
    "ethernet-100": "network_port_gbps_ethernet_100",
}
# The constants of a plan between servers: each fabric's line rate and the ports a server has per card.
NETWORK_CONSTANTS = (*NETWORK_RATE_CONSTANTS.values(), "network_ports_per_gpu")
GRADIENT_BYTES = 2  # gradients are reduced in bf16 (mixed precision)
STORED_WEIGHT_BYTES = 2  # ZeRO-3 gathers the bf16 compute copy of a weight


@dataclass(frozen=True)
class TrainingTime:
    """Hours of a run split into compute and the communication compute does not hide, with the rates used."""

    hours: float
    hours_compute: float
    hours_communication: float
    tokens_per_second: float  # of the whole job
    steps: float
    step_seconds_compute: float
    step_seconds_communication: float  # all of it, hidden or not
    step_seconds_exposed: float
    flops_per_token: float
    efficiency: float  # share of the BF16 peak the compute reaches
    busbw_gbs: float | None  # the effective bus bandwidth of the collectives; None on one card
    link: str
    constants: dict[str, float]

    @property
    def dominant(self) -> str:
        """ "compute" or "communication": which of the two takes more of the hours."""
        return "communication" if self.hours_communication > self.hours_compute else "compute"

    def as_dict(self) -> dict[str, object]:
        return {
            "hours": self.hours,
            "hours_compute": self.hours_compute,
            "hours_communication": self.hours_communication,
            "tokens_per_second": self.tokens_per_second,
            "steps": self.steps,
            "step_seconds_compute": self.step_seconds_compute,
            "step_seconds_communication": self.step_seconds_communication,
            "step_seconds_exposed": self.step_seconds_exposed,
            "flops_per_token": self.flops_per_token,
            "efficiency": self.efficiency,
            "busbw_gbs": self.busbw_gbs,
            "link": self.link,
            "dominant": self.dominant,
            "constants": self.constants,
        }


def attention_flops_per_token(arch: Architecture, setup: first_principles.Setup) -> float:
    """FLOPs of the attention scores and their weighted sum per trained token: per layer and token,
    2·s·d for QKᵀ and 2·s·d for the product with V over the s previous tokens (causal: half of the
    square, so 2·s·d in all), d = heads × head size; the backward pass twice the forward (no weights:
    LoRA pays it too), checkpointing one forward more."""
    if arch.attention_kind == "mla":
        width = arch.heads * (arch.qk_nope_head_dim + arch.qk_rope_head_dim + arch.v_head_dim) / 2
    else:
        width = arch.heads * arch.head_dim
    forward = 2 * setup.seq_len * width * arch.layers
    return forward * (3 + (1 if setup.grad_checkpointing else 0))


def flops_per_token(
    arch: Architecture, setup: first_principles.Setup, c: Mapping[str, float], active_params: float | None = None
) -> float:
    """Hardware FLOPs per trained token: the weights' matmuls on the active parameters (the architecture's,
    or `active_params` for a MoE known only by its counts) and the attention."""
    active = parameter_counts(arch).active if active_params is None else active_params
    return first_principles.training_flops_per_token(active, setup, c) + attention_flops_per_token(arch, setup)


def peak_efficiency(peak_tflops: float, c: Mapping[str, float]) -> float:
    """Share of a card's dense BF16 peak full training reaches: measured on two cards, the faster
    reaching the smaller share (the tensor cores outgrow the rest of the chip); between them linear in
    log(peak), outside them the nearer one's."""
    low, low_peak = float(c["achieved_efficiency_low"]), float(c["achieved_efficiency_low_peak_tflops"])
    high, high_peak = float(c["achieved_efficiency"]), float(c["achieved_efficiency_peak_tflops"])
    if peak_tflops <= low_peak:
        return low
    if peak_tflops >= high_peak:
        return high
    at = math.log(peak_tflops / low_peak) / math.log(high_peak / low_peak)
    return low + (high - low) * at


def efficiency(
    setup: first_principles.Setup, c: Mapping[str, float], peak_tflops: float, fp8: bool | None = None
) -> float:
    """Share of the card's dense BF16 peak the compute reaches: full training's on such a card
    (`peak_efficiency`), times LoRA's (small adapter matmuls beside the frozen ones) and QLoRA's
    (dequantising the base) factors, times FP8's measured speed-up where the matmuls run in FP8
    (`fp8`: whether they do, when not as the setup says: a card without FP8 runs them in BF16)."""
    share = peak_efficiency(peak_tflops, c)
    if not setup.is_full:
        share *= float(c["lora_efficiency_factor"])
    if setup.is_quantised:
        share *= float(c["qlora_efficiency_factor"])
    if setup.fp8 if fp8 is None else fp8:
        share *= float(c["fp8_speedup"])
    if setup.torch_compile:  # measured runs only: the memory estimate refuses torch.compile
        share *= float(c["compile_speedup"])
    return share


def link_busbw_gbs(gpu: Mapping[str, object], link: str, c: Mapping[str, float], cards: int = 2) -> float | None:
    """Effective bus bandwidth (GB/s) of collectives among `cards` cards of one server: NVSwitch at
    `nvlink_busbw_share` of the card's one-way NVLink rate (link_gbs counts both ways), an NVLink bridge
    at its measured share while the cards fit one bridge (`nvlink_bridge_max_gpus`; a ring over more
    crosses PCIe), PCIe at the measured busbw of a server's PCIe tree. None for one card."""
    if link == "one_card":
        return None
    one_way = float(gpu.get("link_gbs") or 0) / 2
    if link == "nvswitch" and one_way:
        return one_way * float(c["nvlink_busbw_share"])
    if link == "nvlink-bridge" and one_way and cards <= float(c["nvlink_bridge_max_gpus"]):
        return one_way * float(c["nvlink_bridge_busbw_share"])
    if link in ("nvswitch", "nvlink-bridge", "pcie"):
        return float(c["pcie_busbw_gbs"])
    raise ValueError(f"unknown link {link!r}; expected one of {', '.join(LINKS)}")


def busbw_gbs(  # noqa: PLR0913
    gpu: Mapping[str, object],
    link: str,
    cards: int,
    nodes: int,
    network_gbps: float | None,
    c: Mapping[str, float],
) -> float | None:
    """The bus bandwidth of the job's collectives (GB/s): inside one server the link's; over `nodes`
    servers the lower of it and the network's: a ring over n ranks on k servers crosses the network
    k−1 times for n−1 hops, so each GPU's share of the server's `network_gbps` (Gbit/s, all its NICs)
    is worth (n−1)/(k−1) of busbw, at `network_busbw_share` of the line rate. None on one card."""
    if cards <= 1:
        return None
    inside = link_busbw_gbs(gpu, "pcie" if link == "one_card" else link, c, cards // nodes)
    if nodes <= 1:
        return inside
    if not network_gbps:
        raise ValueError(f"{nodes} servers need a declared network between them (Gbit/s per server): none is given")
    per_gpu = float(network_gbps) / 8 / (cards / nodes)  # GB/s of NIC per GPU
    across = per_gpu * (cards - 1) / (nodes - 1) * float(c["network_busbw_share"])
    return min(inside, across)


def step_bytes(arch: Architecture, setup: first_principles.Setup) -> float:
    """Bytes each collective of one optimizer step carries, before the ring's (n−1)/n: an all-reduce
    counts twice. Full training's trainable parameters are all of them; LoRA's the adapters only."""
    counts = parameter_counts(arch)
    trainable = (
        counts.total
        if setup.is_full
        else lora_trainable_params(arch, setup.lora_rank, setup.lora_targets, setup.lora_lm_head)
    )
    grads = GRADIENT_BYTES * trainable
    accum = setup.grad_accum
    if setup.sharding in ("ddp", "zero1"):
        return 2 * grads  # one all-reduce (ZeRO-1: reduce-scatter + all-gather) per step
    if setup.sharding == "zero2":
        return accum * grads + grads  # a reduce-scatter per micro-batch, the updated weights gathered once
    stored = (setup.base_bits / 8 if setup.is_quantised else STORED_WEIGHT_BYTES) * counts.total
    return accum * (2 * stored + grads)  # gathered for the forward and the backward, gradients scattered


class SetupFigures:
    """What `training_time` computes of a setup alone (its FLOPs per token, the bytes of a step's
    collectives) and the time constants it reports, for one architecture and constants: a job planned on
    every server signature (recommend.plan_signatures) asks for the same setup on each signature with as
    many cards. The caller makes one per job; a setup is found by its identity (it is kept here)."""

    def __init__(self, arch: Architecture, c: Mapping[str, float], active_params: float | None = None) -> None:
        self.arch, self.c, self.active_params = arch, c, active_params
        self.constants = {k: float(c[k]) for k in TIME_CONSTANTS}
        self._flops: dict[int, tuple[first_principles.Setup, float]] = {}
        self._bytes: dict[int, tuple[first_principles.Setup, float]] = {}

    def fits(self, arch: Architecture, c: Mapping[str, float], active_params: float | None) -> bool:
        """Whether these are the figures of `arch` under `c` (the objects themselves)."""
        return arch is self.arch and c is self.c and active_params == self.active_params

    def flops_per_token(self, setup: first_principles.Setup) -> float:
        kept = self._flops.get(id(setup))
        if kept is None or kept[0] is not setup:
            kept = self._flops[id(setup)] = (setup, flops_per_token(self.arch, setup, self.c, self.active_params))
        return kept[1]

    def step_bytes(self, setup: first_principles.Setup) -> float:
        kept = self._bytes.get(id(setup))
        if kept is None or kept[0] is not setup:
            kept = self._bytes[id(setup)] = (setup, step_bytes(self.arch, setup))
        return kept[1]


def training_time(  # noqa: PLR0913
    arch: Architecture,
    setup: first_principles.Setup,
    gpu: Mapping[str, object],
    tokens: float,
    c: Mapping[str, float],
    link: str = "nvswitch",
    nodes: int = 1,
    network_gbps: float | None = None,
    active_params: float | None = None,
    share: float | None = None,
    figures: SetupFigures | None = None,
) -> TrainingTime:
    """Hours of training `setup` (setup.gpus cards in all, on `nodes` servers) on `tokens` tokens; `link` is
    how the cards of one server are joined (LINKS), `network_gbps` the Gbit/s of each server's network.
    `active_params` overrides the architecture's active parameters (a MoE given by its counts only);
    `share` the share of the BF16 peak the compute reaches (a reader's own figure instead of `efficiency`).
    A card without an FP8 figure computes in BF16: FP8's speed-up applies only where `fp8_dense_tflops` is.
    `figures`: the setup's own figures kept for the job (the same numbers, made once)."""
    if figures is None or not figures.fits(arch, c, active_params):
        figures = SetupFigures(arch, c, active_params)
    cards = setup.gpus
    link = "one_card" if cards == 1 else link
    per_token = figures.flops_per_token(setup)
    peak = float(gpu["bf16_dense_tflops"])
    share = efficiency(setup, c, peak, fp8=setup.fp8 and bool(gpu.get("fp8_dense_tflops"))) if share is None else share
    rate = peak * 1e12 * share  # achieved FLOP/s of one card
    tokens_per_step = setup.micro_batch * setup.seq_len * setup.grad_accum * cards
    compute = per_token * tokens_per_step / cards / rate
    bw = busbw_gbs(gpu, link, cards, nodes, network_gbps, c)
    communication = 0.0 if bw is None else figures.step_bytes(setup) * (cards - 1) / cards / (bw * 1e9)
    exposed = max(0.0, communication - float(c["comm_overlap"]) * compute)
    steps = tokens / tokens_per_step
    used = figures.constants
    return TrainingTime(
        hours=steps * (compute + exposed) / 3600,
        hours_compute=steps * compute / 3600,
        hours_communication=steps * exposed / 3600,
        tokens_per_second=tokens_per_step / (compute + exposed),
        steps=steps,
        step_seconds_compute=compute,
        step_seconds_communication=communication,
        step_seconds_exposed=exposed,
        flops_per_token=per_token,
        efficiency=share,
        busbw_gbs=bw,
        link="between_servers" if nodes > 1 else link,
        constants=used,
    )


def server_network_gbps(server: Mapping[str, object], c: Mapping[str, float]) -> float | None:
    """Gbit/s of a server's declared inter-node network (servers.network), all its ports together: the
    fabric's line rate per port times `network_ports_per_gpu` ports per card; None without a network."""
    network = server.get("network")
    if not network:
        return None
    return float(c[NETWORK_RATE_CONSTANTS[network]]) * float(c["network_ports_per_gpu"]) * int(server["gpu_count"])


def server_time(  # noqa: PLR0913
    arch: Architecture,
    setup: first_principles.Setup,
    gpu: Mapping[str, object],
    tokens: float,
    c: Mapping[str, float],
    server: Mapping[str, object],
    servers_count: int = 1,
    share: float | None = None,
    figures: SetupFigures | None = None,
) -> TrainingTime | None:
    """`training_time` of `setup` on `servers_count` catalog servers: their interconnect inside each, their
    declared network between them. None when the job spans servers with no declared network (no plan), or
    when the time is not finite."""
    network = server_network_gbps(server, c) if servers_count > 1 else None
    if servers_count > 1 and network is None:
        return None
    link = SERVER_LINKS[str(server["interconnect"])]
    t = training_time(arch, setup, gpu, tokens, c, link, servers_count, network, share=share, figures=figures)
    return t if math.isfinite(t.hours) else None  # a constant at the edge of its bounds: no time, not infinity
