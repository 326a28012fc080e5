"""The CPU policy: shared vCPUs (VCPU) or pinned ones (PCPU), and what it asks of the host's threads.

``hw:cpu_policy=dedicated`` (or ``hw_cpu_policy`` of the image, unless the flavor says ``shared``)
asks for the flavor's vCPUs as PCPU; so does ``resources[<S>]:PCPU=<vcpus>`` without a policy.
``hw:cpu_thread_policy`` of pinned CPUs becomes the trait HW_CPU_HYPERTHREADING: ``require`` asks
for it, ``isolate`` forbids it, ``prefer`` leaves it out; a flavor may name that trait itself
instead. The rules on conflicts between flavor and image are Nova's.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from berth.scheduler.errors import SpecError
from berth.scheduler.request.flavor import Flavor, Image, hw_values
from berth.scheduler.request.groups import Groups

CPU_POLICIES: Final = ("shared", "dedicated", "mixed")
THREAD_POLICIES: Final = ("prefer", "isolate", "require")
EMULATOR_THREADS_POLICIES: Final = ("share", "isolate")
HYPERTHREADING: Final = "HW_CPU_HYPERTHREADING"
_THREAD_TRAIT: Final = {"require": "required", "isolate": "forbidden"}


def translate_cpu_policy(flavor: Flavor, image: Image, groups: Groups) -> bool:
    """Whether the instance's CPUs are pinned; a pinning policy's PCPU and hyperthreading trait
    go into the unsuffixed group."""
    policy = _cpu_policy(flavor, image)
    if policy == "mixed":
        raise SpecError(
            "hw:cpu_policy",
            "'mixed' is not supported: the compute agent claims all of an instance's CPUs as shared or all as pinned",
        )
    _check_emulator_threads(flavor)
    explicitly_pinned = _explicit_cpu_class(flavor, groups, policy) == "PCPU"
    dedicated = policy == "dedicated" or explicitly_pinned
    thread = _thread_policy(flavor, image, groups)
    if thread is not None and not dedicated:
        raise SpecError(thread.key, "a CPU thread policy needs pinned CPUs (hw:cpu_policy=dedicated)")
    if policy == "dedicated":
        groups.unsuffixed.add_resource("PCPU", flavor.vcpus, "hw:cpu_policy")
    if thread is not None and not thread.from_trait and thread.policy in _THREAD_TRAIT:
        groups.unsuffixed.add_trait(HYPERTHREADING, _THREAD_TRAIT[thread.policy], thread.key)
    return dedicated


def _explicit_cpu_class(flavor: Flavor, groups: Groups, policy: str | None) -> str | None:
    """VCPU or PCPU when a resources extra spec asks for one of them (not 0), instead of a policy."""
    merged = groups.merged_resources()
    vcpu_key, pcpu_key = (groups.key_of(rc) if merged[rc] else None for rc in ("VCPU", "PCPU"))
    explicit = vcpu_key or pcpu_key
    if explicit is None:
        return None
    if policy is not None:
        raise SpecError(explicit, "cannot be combined with a CPU policy (hw:cpu_policy or hw_cpu_policy); use one")
    if vcpu_key and pcpu_key:
        raise SpecError(pcpu_key, f"VCPU ({vcpu_key}) and PCPU cannot both be asked for; use one")
    if pcpu_key and merged["PCPU"] != flavor.vcpus:
        raise SpecError(
            pcpu_key, f"asks for {merged['PCPU']} PCPU; pinned CPUs are exactly the flavor's {flavor.vcpus}"
        )
    return "PCPU" if pcpu_key else "VCPU"


def _cpu_policy(flavor: Flavor, image: Image) -> str | None:
    """The flavor's policy wins; an image may pin only what the flavor leaves open."""
    flavor_policy, image_policy = hw_values(flavor, image, "cpu_policy")
    for key, value in (("hw:cpu_policy", flavor_policy), ("hw_cpu_policy", image_policy)):
        if value is not None and value not in CPU_POLICIES:
            raise SpecError(key, f"{value!r} is not one of {', '.join(CPU_POLICIES)}")
    if flavor_policy == "shared" and image_policy in ("dedicated", "mixed"):
        raise SpecError("hw_cpu_policy", f"the image asks for {image_policy!r}, the flavor says 'shared'")
    if flavor_policy == "mixed" and image_policy == "dedicated":
        raise SpecError("hw_cpu_policy", "the image asks for 'dedicated', the flavor says 'mixed'")
    return flavor_policy or image_policy


class ThreadPolicy(NamedTuple):
    policy: str
    key: str  # the extra spec, image property or trait key that set it
    from_trait: bool


def _thread_policy(flavor: Flavor, image: Image, groups: Groups) -> ThreadPolicy | None:
    flavor_policy, image_policy = hw_values(flavor, image, "cpu_thread_policy")
    for key, value in (("hw:cpu_thread_policy", flavor_policy), ("hw_cpu_thread_policy", image_policy)):
        if value is not None and value not in THREAD_POLICIES:
            raise SpecError(key, f"{value!r} is not one of {', '.join(THREAD_POLICIES)}")
    if flavor_policy not in (None, "prefer") and image_policy is not None and image_policy != flavor_policy:
        raise SpecError(
            "hw_cpu_thread_policy", f"the image asks for {image_policy!r}, the flavor for {flavor_policy!r}"
        )
    policy, key = (flavor_policy, "hw:cpu_thread_policy") if flavor_policy else (image_policy, "hw_cpu_thread_policy")
    trait_key = next((g.keys[HYPERTHREADING] for g in groups if HYPERTHREADING in g.keys), None)
    if trait_key is None:
        return ThreadPolicy(policy, key, from_trait=False) if policy is not None else None
    if policy is not None:
        raise SpecError(trait_key, f"cannot be combined with {key}; use one")
    required = any(HYPERTHREADING in g.required for g in groups)
    return ThreadPolicy("require" if required else "isolate", trait_key, from_trait=True)


def _check_emulator_threads(flavor: Flavor) -> None:
    value = flavor.extra_specs.get("hw:emulator_threads_policy")
    if value is None:
        return
    if value not in EMULATOR_THREADS_POLICIES:
        raise SpecError("hw:emulator_threads_policy", f"{value!r} is not one of {', '.join(EMULATOR_THREADS_POLICIES)}")
    if value == "isolate":
        raise SpecError(
            "hw:emulator_threads_policy",
            "'isolate' is not supported: the compute agent claims exactly the flavor's vCPUs as pinned CPUs",
        )
