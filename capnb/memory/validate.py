"""The vLLM accounting against published vLLM start-up logs: ``python -m capnb.memory.validate``.

Each log in ``datasets/benchmarks/vllm_logs/vllm_startup_logs.csv`` names a model, GPU, tensor
parallelism, vLLM version and settings, and what vLLM logged: the KV cache in GiB ("Available KV
cache memory") and, where the log shows it, in tokens ("GPU KV cache size: N tokens", or
"# GPU blocks" x block size). capnb predicts the tokens with :func:`capnb.memory.max_concurrency`
(``accounting="vllm"`` with the log's ``vllm_version`` and settings) and the table here gives the
error. Where a log gives only GiB, the logged tokens are those GiB in whole blocks of the model's KV
bytes per token, the way vLLM turns its budget into blocks.

The printed Markdown is the section "vLLM memory: KV cache tokens against published start-up logs"
of VALIDATION.md (``--write VALIDATION.md`` replaces it there); a test compares the two so that the
file cannot go stale.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
from dataclasses import dataclass
from pathlib import Path

from ..data import dataset_path, load_model, write_section
from ..errors import ConfigError
from ._footprint import VLLM_VERSIONS, accounting, max_concurrency

__all__ = ["KNOWN_MISSES", "NOT_ROWS", "TOLERANCE", "LogCheck", "check_logs", "main", "markdown"]

GIB = 2**30

#: Largest relative error of predicted ``kv_cache_tokens`` the tests accept.
TOLERANCE = 0.02

#: Logs the accounting misses by more than :data:`TOLERANCE`, and what is known of why.
KNOWN_MISSES = {
    "llmd-gpt-oss-120b-tp1": (
        "the cache is small (3.33 GiB), so 0.35 GiB is 10 %: the logged items add up to 75.22 "
        "GiB, 3.96 GiB over the 71.26 GiB budget, so the 64.38 GiB 'Model loading took' cannot "
        "be what the profiler subtracted (vLLM 0.11's MXFP4 layer rebuilds the expert weights "
        "after loading, quantization/mxfp4.py); the budget less the logged peak, non-torch and "
        "KV leaves 60.42 GiB of weights, 0.27 GiB under capnb's 60.69 GiB from the checkpoint, "
        "and the sampler reserve is 7.46 GiB against 7.38 logged (the per-call MoE buffers, 0.53 "
        "GiB, stay under it, as the equal 7.38 GiB of gpt-oss-20b shows)"
    ),
    "issue21348-qwen3-235b-fp8-tp4": (
        "the run loaded an LMCache connector (kv-transfer-config), whose GPU buffers vLLM's "
        "profiler counts and capnb does not; the report gives neither the weights nor the "
        "activation peak, so the 1.9 GiB gap cannot be split; no non-torch figure at TP 4 was "
        "found (the TP 2 one is used); and the logged 8.11 GiB is 1.2 % more than 178,880 tokens "
        "x 48,128 bytes, so the log itself does not turn all of its budget into tokens"
    ),
}

#: What a TP 8 log states beyond the file's columns, for the split of its error.
TP8_CONTEXT = {
    "aiplatform-qwen3-235b-fp8-l40s-tp8": (
        "the log has 0.17 to 0.21 GiB of non-torch memory on these PCIe-only GPUs, which run "
        "without vLLM's custom all-reduce (its custom_all_reduce.py warning; whether that is "
        "the whole difference from the H100's 0.55 GiB at TP 2 the log cannot say), so capnb's "
        "weights (-0.16 GiB) and non-torch memory (+0.34 to +0.38 GiB) are off in opposite "
        "directions and partly cancel; it ran with expert parallelism, 16 of 128 experts per "
        "GPU, the same 1/8 share of the weights as TP; and the L40S's 44.42 GiB that the driver "
        "reports, which the GPU catalog takes from this log, is a device constant (the "
        "marketed 45.0 GiB would give +3.6 %)"
    ),
}

#: Published start-up logs found but not rows of the file, and why.
NOT_ROWS = (
    "vllm-project/vllm pull request 10511 at TP 2 (Meta-Llama-3-8B, H100): its KV figure is cut in "
    "the stored copy; its non-torch 3.58 GiB is the 0.6 bucket's TP >= 2 figure",
    "llm-d-benchmark's Mistral-Small-3.2-24B run (TP 1, 184,832 tokens logged): a vision-language "
    "model outside the catalog, whose logged activation peak (2.12 GiB) is well under the sampler "
    "estimate (4.9 GiB), so the estimate does not carry over to such models unchecked",
    "vllm-project/vllm issues 10517 (RTX 3090, 0.6.4) and 13061 (2 x RTX 4090, TP 2, 2025-02): GPUs "
    "outside the catalog, and 0.6.4 predates pull request 10511's accounting",
    "vllm-project/vllm pull request 2031 (Llama-2-70B, TP 4 on A100-80GB, 20,865 blocks): the "
    "2023 profiler (v0.2), which no bucket models",
    "llm-d-planner's other vLLM 0.19.0 runs (none at TP 8: its H100 runs stop at TP 4): models "
    "outside the catalog (Qwen2.5, Gemma 2 and 3, Granite, Phi, Kimi, CodeLlama, and the mixtures "
    "of experts Qwen1.5-MoE-A2.7B, DeepSeek-V2-Lite, Kimi-VL-A3B, Llama-4-Scout and gpt-oss-20b), "
    "pipeline-parallel "
    "runs (no pipeline parallelism in capnb), a float32 run, and the repeats of Llama-3.1-8B at "
    "max_model_len 2,048 to 32,768 (the same 476,016 tokens: the budget does not depend on it)",
    "TP 8 logs: vllm-project/vllm issue 6746 (Meta-Llama-3.1-405B-Instruct-FP8 on 8 x H100, vLLM "
    "of 2024-07, 57.75 GB of weights per GPU), the V0 profiler before pull request 10511, which "
    "no bucket models; ajith-sirra-amd/InferenceMAX_Rocm_Team @59882861 (vLLM 0.22.0 server logs "
    "of Kimi-K2.5-NVFP4 at TP 8 on B200, e.g. 86.18 GiB and 2,633,536 tokens), a multimodal "
    "model outside the catalog with NVFP4 experts, on a GPU with no catalogued reported memory; "
    "vllm-project/vllm-ascend issues 2235 and 2473 (TP 8), Ascend NPUs outside the catalog",
)

HEADING = "## vLLM memory: KV cache tokens against published start-up logs"

_REQUIRED = (
    "log_id", "url", "model", "weight_dtype", "gpu", "tensor_parallel", "vllm_version_logged",
    "vllm_version", "gpu_memory_utilization", "max_model_len", "max_num_batched_tokens",
    "max_num_seqs", "block_size", "kv_cache_gib", "kv_cache_tokens", "role",
)  # fmt: skip


@dataclass(frozen=True)
class LogCheck:
    """One published start-up log and capnb's prediction of its KV cache tokens.

    Attributes
    ----------
    logged_activation_gib, predicted_activation_gib
        The profile run's activation peak per GPU in GiB: as the log states it (None where it
        does not) and as the log's version bucket predicts it.
    """

    log_id: str
    url: str
    model: str
    gpu: str
    tensor_parallel: int
    vllm_version_logged: str
    vllm_version: str
    role: str
    logged_tokens: int
    tokens_logged_directly: bool
    predicted_tokens: int
    logged_activation_gib: float | None = None
    predicted_activation_gib: float = 0.0

    @property
    def error(self) -> float:
        """(predicted - logged) / logged."""
        return (self.predicted_tokens - self.logged_tokens) / self.logged_tokens


def _field(row: dict, key: str, where: str, kind=str):
    value = (row.get(key) or "").strip()
    if not value:
        raise ConfigError(f"{where}: missing field {key!r}")
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"{where}: field {key!r} is not a {kind.__name__} ({value!r})") from None


def _accounting(row: dict, where: str):
    """The vLLM accounting of a log: its version bucket and settings."""
    return accounting(
        "vllm",
        vllm_version=_field(row, "vllm_version", where),
        gpu_memory_utilization=_field(row, "gpu_memory_utilization", where, float),
        block_tokens=_field(row, "block_size", where, int),
        max_num_batched_tokens=_field(row, "max_num_batched_tokens", where, int),
        max_num_seqs=_field(row, "max_num_seqs", where, int),
    )


def _check(row: dict, where: str) -> LogCheck:
    version = _field(row, "vllm_version", where)
    if version not in VLLM_VERSIONS:
        raise ConfigError(f"{where}: vllm_version {version!r} is not one of {list(VLLM_VERSIONS)}")
    tp = _field(row, "tensor_parallel", where, int)
    block = _field(row, "block_size", where, int)
    acct = _accounting(row, where)
    model, weight_dtype = _field(row, "model", where), _field(row, "weight_dtype", where)
    kv_dtype = (row.get("kv_cache_dtype") or "").strip() or "auto"
    result = max_concurrency(
        model=model,
        gpu=_field(row, "gpu", where),
        tensor_parallel=tp,
        seq_len=_field(row, "max_model_len", where, int),
        weight_dtype=weight_dtype,
        kv_dtype=kv_dtype,
        accounting=acct,
    )
    direct = bool((row.get("kv_cache_tokens") or "").strip())
    if direct:
        logged = _field(row, "kv_cache_tokens", where, int)
    else:
        per_block = block * load_model(model).kv_bytes_per_token(kv_dtype, tp)
        gib = _field(row, "kv_cache_gib", where, float)
        logged = math.floor(gib * GIB / per_block) * block
    if logged <= 0:
        raise ConfigError(f"{where}: the logged KV cache holds no token")
    peak = (
        _field(row, "activation_peak_gib", where, float) if row.get("activation_peak_gib") else None
    )
    return LogCheck(
        log_id=_field(row, "log_id", where),
        url=_field(row, "url", where),
        model=model,
        gpu=str(result.gpu.values[0]),
        tensor_parallel=tp,
        vllm_version_logged=_field(row, "vllm_version_logged", where),
        vllm_version=version,
        role=_field(row, "role", where),
        logged_tokens=logged,
        tokens_logged_directly=direct,
        predicted_tokens=int(result.kv_cache_tokens.values.item()),
        logged_activation_gib=peak,
        predicted_activation_gib=acct.activation_bytes(load_model(model), tp) / GIB,
    )


def check_logs(path: str | os.PathLike | None = None) -> list[LogCheck]:
    """Predict ``kv_cache_tokens`` for every log of the file (default: the bundled one).

    Raises
    ------
    ConfigError
        A row lacks a field or has a bad one (the message names the file, row and field).
    """
    path = Path(path) if path is not None else dataset_path("benchmarks", "vllm_logs",
                                                             "vllm_startup_logs.csv")  # fmt: skip
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in _REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise ConfigError(f"{path.name}: missing column(s) {missing}")
        return [_check(row, f"{path.name} row {i + 2}") for i, row in enumerate(reader)]


def markdown(checks: list[LogCheck] | None = None) -> str:
    """The VALIDATION.md section: how the check works, the table, the misses and their reasons."""
    checks = check_logs() if checks is None else checks
    lines = [
        HEADING,
        "",
        "Generated by `python -m capnb.memory.validate --write VALIDATION.md` from "
        "`datasets/benchmarks/vllm_logs/vllm_startup_logs.csv` (sources in `datasets/README.md`); "
        "`tests/test_memory_vllm_logs.py` fails when this section differs from what the command "
        "prints.",
        "",
        "capnb predicts the KV cache vLLM allocates with "
        '`capnb.memory.max_concurrency(..., accounting="vllm", vllm_version=...)`: '
        "gpu_memory_utilization x the memory the driver reports, minus the weights per GPU (from "
        "the model's architecture), the activation peak of the profile run (the larger of the "
        "forward pass over max_num_batched_tokens and the sampler's fp32 logits over "
        "max_num_seqs; for a mixture of experts under 0.19, plus the fused-MoE workspace that "
        "vLLM 0.19.0's Triton experts keep through the sampler's run: tokens x top_k x "
        "(max(I, H) + max(2 I, H)) x 2 bytes, with I the expert's intermediate size per GPU and "
        "H the hidden size) and the non-torch memory of that version, in whole blocks. *Logged* is "
        'vLLM\'s "GPU KV cache size" (per GPU of the tensor-parallel group, not multiplied by '
        'TP); marked † where the log gives only "Available KV cache memory" in GiB, converted to '
        "whole blocks. *Calibration* logs set one constant of their version bucket each (the "
        "sampler's buffer count, a non-torch figure); *held-out* logs set nothing.",
        "",
        "| log | model | GPU | TP | vLLM (bucket) | role | logged tokens | predicted | error |",
        "|---|---|---|---:|---|---|---:|---:|---:|",
    ]
    for c in checks:
        mark = "" if c.tokens_logged_directly else " †"
        lines.append(
            f"| [{c.log_id}]({c.url}) | {c.model} | {c.gpu} | {c.tensor_parallel} | "
            f"{c.vllm_version_logged} ({c.vllm_version}) | {c.role} | "
            f"{c.logged_tokens:,}{mark} | {c.predicted_tokens:,} | {c.error * 100:+.2f} % |"
        )
    within = [c for c in checks if abs(c.error) <= TOLERANCE]
    lines += [
        "",
        f"{len(within)} of {len(checks)} logs within {TOLERANCE:.0%}; TP degrees covered: "
        f"{', '.join(str(t) for t in sorted({c.tensor_parallel for c in checks}))}.",
    ]
    misses = [c for c in checks if abs(c.error) > TOLERANCE]
    for c in misses:
        why = KNOWN_MISSES.get(c.log_id, "not explained")
        lines.append(f"- {c.log_id} misses by {c.error * 100:+.1f} %: {why}.")
    lines += [
        *_tp8_lines(checks),
        "",
        _activation_peaks(checks),
        "",
        _by_release(checks),
        "",
        "Logs found but not rows:",
        "",
        *[f"- {why}." for why in NOT_ROWS],
        "",
    ]
    return "\n".join(lines)


def _tp8_lines(checks: list[LogCheck]) -> list[str]:
    """What the TP 8 logs check, split the way they log it, and what no log reached."""
    lines = []
    for c in (c for c in checks if c.tensor_parallel == 8):
        row = _row(c.log_id)
        spec, acct, tp = load_model(c.model), _accounting(row, c.log_id), c.tensor_parallel
        weights = spec.weight_bytes_per_gpu(tp, row["weight_dtype"]) / GIB
        non_torch = (acct.reserve_bytes(spec, tp) - acct.activation_bytes(spec, tp)) / GIB
        logged_w = (row.get("weights_gib") or "").strip()
        logged_w = f"logged {float(logged_w):.2f}" if logged_w else "not logged"
        logged_a = c.logged_activation_gib
        logged_a = f"logged {logged_a:.2f}" if logged_a is not None else "not logged"
        lines.append(
            f"- TP 8, {c.log_id} ({c.gpu}, vLLM {c.vllm_version_logged}, {c.vllm_version} bucket): "
            f"{c.error * 100:+.2f} %. Per GPU, capnb counts weights {weights:.2f} GiB ({logged_w}), "
            f"an activation peak {c.predicted_activation_gib:.2f} GiB ({logged_a}) and non-torch "
            f"{non_torch:.2f} GiB, the bucket's TP >= 2 figure; "
            f"{TP8_CONTEXT.get(c.log_id, 'the log states no more')}."
        )
    lines.append(
        "- Not reached: no published TP 8 start-up log on NVLink GPUs (H100, H200, B200, MI300X) "
        "with the settings of a catalog model was found (vllm-project/vllm issues, "
        "llm-d-benchmark, llm-d-planner's 0.19.0 runs, InferenceMAX results), nor any TP 8 log "
        "for the 0.6 or 0.19 bucket, so the non-torch memory of an NVLink TP 8 group (custom "
        "all-reduce and NCCL buffers) is not checked; TP >= 4 uses the TP 2 non-torch figure "
        "(vLLM 0.19 logs 2.07 GiB at TP 2 and 2.13 GiB at TP 4)."
    )
    return lines


def _activation_peaks(checks: list[LogCheck]) -> str:
    """The profile run's activation peak, predicted against the logs that state it (0.19 only)."""
    rows = [c for c in checks if c.vllm_version == "0.19" and c.logged_activation_gib is not None]
    lines = [
        'The 0.19 bucket\'s activation peak against the logged "torch peak memory increase" '
        "(GiB per GPU; the Llama-3.1-8B TP 1 log sets the sampler's buffer count, so its row "
        "matches by construction; the mixtures of experts add the fused-MoE workspace, not fitted):",
        "",
        "| log | model | TP | logged | predicted | difference |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for c in rows:
        diff = c.predicted_activation_gib - c.logged_activation_gib
        lines.append(
            f"| {c.log_id} | {c.model} | {c.tensor_parallel} | {c.logged_activation_gib:.2f} | "
            f"{c.predicted_activation_gib:.2f} | {diff:+.2f} |"
        )
    moe = [c for c in rows if load_model(c.model).is_moe]
    if moe:
        worst = max(abs(c.predicted_activation_gib - c.logged_activation_gib) for c in moe)
        dense = max((abs(c.predicted_activation_gib - c.logged_activation_gib)
                     for c in rows if c not in moe), default=0.0)  # fmt: skip
        lines += [
            "",
            f"Largest difference: {worst:.2f} GiB on the mixtures of experts, {dense:.2f} GiB on "
            "the dense models, whose peaks carry no MoE term; the workspace itself is "
            + ", ".join(
                f"{_moe_gib(c):.2f} GiB for {c.model} at TP {c.tensor_parallel}" for c in moe
            )
            + " (vLLM 0.19.0's shapes, see docs/memory.md).",
        ]
    return "\n".join(lines)


def _moe_gib(check: LogCheck) -> float:
    acct = accounting("vllm", vllm_version=check.vllm_version)
    return acct.moe_workspace_bytes(load_model(check.model), check.tensor_parallel) / GIB


def _by_release(checks: list[LogCheck]) -> str:
    """One line per version bucket: its held-out logs within the tolerance, and their TP degrees."""
    lines = ["Held out, by release bucket:", ""]
    for version in VLLM_VERSIONS:
        held = [c for c in checks if c.vllm_version == version and c.role == "held-out"]
        if not held:
            lines.append(f"- {version}: no held-out log.")
            continue
        within = [c for c in held if abs(c.error) <= TOLERANCE]
        tps = ", ".join(str(t) for t in sorted({c.tensor_parallel for c in held}))
        worst = max(held, key=lambda c: abs(c.error))
        lines.append(
            f"- {version}: {len(within)} of {len(held)} held-out logs within {TOLERANCE:.0%} "
            f"(TP {tps}; largest error {worst.error * 100:+.2f} %, {worst.log_id})."
        )
    newest, before = VLLM_VERSIONS[-1], VLLM_VERSIONS[-2]
    logs = [c for c in checks if c.vllm_version == newest]
    if logs:
        errors = sorted(_predicted_by(c, before) / c.logged_tokens - 1 for c in logs)
        lines += [
            "",
            f"The {newest} logs counted with the {before} bucket (the profiler of a release "
            f"before): {errors[0] * 100:+.1f} % to {errors[-1] * 100:+.1f} % "
            f"({sum(abs(e) <= TOLERANCE for e in errors)} of {len(errors)} within "
            f"{TOLERANCE:.0%}): its activation reserve, 4.76 GiB for Llama-3.1-8B, is 2.5 times "
            "what 0.19 logs.",
        ]
    return "\n".join(lines)


def _row(log_id: str) -> dict:
    """The bundled file's row of a log."""
    path = dataset_path("benchmarks", "vllm_logs", "vllm_startup_logs.csv")
    with open(path, newline="", encoding="utf-8") as handle:
        return next(r for r in csv.DictReader(handle) if r["log_id"] == log_id)


def _predicted_by(check: LogCheck, version: str) -> int:
    """The tokens another version bucket predicts for a log (its own settings otherwise)."""
    return _check({**_row(check.log_id), "vllm_version": version}, check.log_id).predicted_tokens


def main(argv=None) -> int:
    """The command line: print the section; with ``--write``, store it in that file."""
    parser = argparse.ArgumentParser(
        prog="python -m capnb.memory.validate", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--write", metavar="VALIDATION.md", help="store the section there")
    args = parser.parse_args(argv)
    text = markdown()
    print(text, end="")
    if args.write:
        write_section(Path(args.write), text)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
