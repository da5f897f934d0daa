"""How a training run executed, for its record and its MLflow tags: the precision the loop
resolved ``train.precision`` to, the CPU threads torch used and, on a GPU shared through the
workflow's slots (:mod:`hkt.gpu_slots`), which slot of which GPU the job held and how
many of that GPU's slots were held when it got its own and, at most, at its sync points since.

Read at run time from the process (torch's threads, the slot claim), never from the training
config: these describe where a run ran, not what it computes, so they change no config digest
and no training number. Where the run shared nothing through the slots (a CPU, or a GPU the job
was given whole or outside the workflow), the record claims no sharing: it says nothing.
"""

from __future__ import annotations

from typing import Any

__all__ = ["precision_label", "gpu_sharing", "execution", "execution_tags", "sample_sharing",
           "out_of_memory"]

_SHORT = {"bfloat16": "bf16", "float16": "fp16"}


def precision_label(amp: Any) -> str:
    """``fp32``, or ``<dtype> autocast`` for the autocast dtype ``amp`` (a ``torch.dtype``, as
    :func:`hkt.train.step.autocast_dtype` returns it; None: fp32)."""
    if amp is None:
        return "fp32"
    name = str(amp).removeprefix("torch.")
    return f"{_SHORT.get(name, name)} autocast"


def gpu_sharing(claim: Any) -> dict[str, int] | None:
    """What the record says of the GPU slot ``claim`` (:class:`hkt.gpu_slots.Claim`;
    None: no claim, nothing said)."""
    if claim is None or claim.layout is None:
        return None
    return {"gpu": int(claim.gpu), "gpus": int(claim.layout.gpus),
            "slot": int(claim.slots[0]) + 1, "jobs_per_gpu": int(claim.layout.per_gpu),
            "held_at_start": int(claim.held_at_start), "held_most": int(claim.held_most)}


def sample_sharing(claim: Any) -> None:
    """Count how many of the claim's GPU slots are held now into its ``held_most`` (nothing
    without a claim): a few lock probes, at a training run's sync points."""
    if claim is not None:
        claim.sample()


def execution(device_type: str, amp: Any, threads: int, claim: Any = None) -> dict[str, Any]:
    """The record's ``precision``, ``threads`` and, on CUDA with a slot ``claim``,
    ``gpu_sharing`` (see hkt/schemas/run_record.schema.json)."""
    fields: dict[str, Any] = {"precision": precision_label(amp), "threads": int(threads)}
    sharing = gpu_sharing(claim) if device_type == "cuda" else None
    if sharing is not None:
        fields["gpu_sharing"] = sharing
    return fields


def execution_tags(fields: dict[str, Any]) -> dict[str, str]:
    """The same as MLflow tags: ``precision``, ``threads``, ``gpu_sharing.KEY``."""
    tags = {k: str(fields[k]) for k in ("precision", "threads") if k in fields}
    tags.update({f"gpu_sharing.{k}": str(v) for k, v in (fields.get("gpu_sharing") or {}).items()})
    return tags


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def out_of_memory(device: str, memory: tuple[int, int, int] | None, claim: Any,
                  batch_size: int, then: str) -> str:
    """The one line of a job that ran out of GPU memory: the ``device``, its ``memory`` in use
    (all processes, the total, this job's: :func:`hkt.device.cuda_memory`), the workflow slot
    it held (``claim``) and what to change; ``then``: what the same command does next."""
    used = (f"{_gib(memory[0])} of {_gib(memory[1])} in use, {_gib(memory[2])} of it this job's"
            if memory is not None else "memory in use unknown")
    if claim is not None and claim.layout is not None:
        now = claim.held_now()
        slot = (f"slot {claim.slots[0] + 1} of {claim.layout.per_gpu} on GPU {claim.gpu}"
                + (f", {now} of them held" if now is not None else ""))
        change = (f"lower jobs_per_gpu (now {claim.layout.per_gpu}: --config jobs_per_gpu=N) "
                  f"or train.batch_size (now {batch_size})")
    else:
        slot, change = "a GPU of its own", f"lower train.batch_size (now {batch_size})"
    return f"CUDA out of memory on {device} ({used}; {slot}): {change}; {then}"
