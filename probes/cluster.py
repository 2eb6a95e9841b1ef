"""Run the environment and GPU probes on every alive node of a Ray cluster and flag what differs.

One task per node, pinned with ``NodeAffinitySchedulingStrategy(node_id, soft=False)`` and ``num_cpus=0`` so
it runs even when the training job holds every CPU (Ray docs, "Scheduling strategies"). Each node must have
grpo-debug importable in the Python that Ray runs (the same environment as the job). Never raises: a node
that fails or times out is reported with its error.

Trust boundary: ``ray.init`` and ``ray.get`` deserialize (pickle) what the cluster sends, so a hostile "Ray
node" can run code in the process that connects. The connection therefore happens in a child process
(``python -I``, see :func:`grpo_debug.probes.base.child_argv`) that prints the report as JSON; the caller
only parses JSON. The MCP server never takes the address from a client: only its owner sets it
(``grpo-debug serve --ray-address`` or ``GRPO_DEBUG_RAY_ADDRESS``).
"""
from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
from typing import Any

from pydantic import BaseModel, Field

# facts whose disagreement across nodes breaks multi-node runs (or explains one node failing)
COMPARED_PREFIXES = ("probe.versions.", "probe.torch_", "probe.driver_version", "probe.ulimit_nofile", "probe.dev_shm_gib",
                     "probe.python", "probe.env.NCCL_", "probe.env.TORCH_NCCL_", "probe.gpu_names", "probe.gpu_count",
                     "probe.conflicts")


class NodeReport(BaseModel):
    node_id: str = Field(description="Ray node id (first 12 characters).")
    ip: str | None = None
    hostname: str | None = None
    facts: dict[str, Any] = Field(default_factory=dict, description="host_facts() of that node.")
    error: str | None = None


class Difference(BaseModel):
    fact: str
    values: dict[str, Any] = Field(description="node (ip or id) -> value; '(absent)' when that node could not read it.")


class ClusterReport(BaseModel):
    address: str
    nodes: list[NodeReport] = Field(default_factory=list)
    differences: list[Difference] = Field(default_factory=list)
    summary: str
    error: str | None = None


def _node_task() -> str:
    """Runs on a node: its host facts (no numerics, no GPU compute, no torch import) as a JSON string."""
    from grpo_debug.probes.collect import collect_host, host_facts

    return json.dumps({"hostname": socket.gethostname(), "facts": host_facts(collect_host(numerics=False))},
                      default=str)


_ADDRESS = re.compile(r"(?:auto|local|(?:ray://)?[A-Za-z0-9._-]{1,253}:\d{1,5}|\[[0-9A-Fa-f:]{2,45}\]:\d{1,5})")


def check_address(address: str) -> str:
    """Validate a Ray address: ``auto``, ``local``, ``host:port``, ``ray://host:port`` or ``[v6]:port``.

    Raises ValueError naming the accepted forms. Used for the server owner's ``--ray-address``.
    """
    if not isinstance(address, str) or not _ADDRESS.fullmatch(address.strip()):
        raise ValueError(f"not a Ray address: {str(address)[:80]!r}; give auto, local, HOST:PORT or ray://HOST:PORT")
    return address.strip()


def compare_nodes(nodes: list[NodeReport]) -> list[Difference]:
    """Facts (of COMPARED_PREFIXES) that are not the same on every node that answered."""
    ok = [n for n in nodes if n.error is None]
    if len(ok) < 2:
        return []
    keys = sorted({k for n in ok for k in n.facts if k.startswith(COMPARED_PREFIXES)})
    out = []
    for k in keys:
        vals = {(n.ip or n.node_id): n.facts.get(k, "(absent)") for n in ok}
        if len({repr(v) for v in vals.values()}) > 1:
            out.append(Difference(fact=k, values=vals))
    return out


def probe_cluster(address: str = "auto", timeout: float = 120.0) -> ClusterReport:
    """Probe every alive node of the Ray cluster at ``address`` (e.g. '10.0.0.5:6379' or 'auto').

    Connects from a child process (see the module docstring) and reads its report as JSON; waits at most
    ``timeout`` seconds for the nodes, plus start-up and shutdown margin for the child. Returns a
    ClusterReport; a bad address, connection failures and per-node failures are reported in it, not raised.
    """
    from grpo_debug.probes.base import child_argv

    try:
        address = check_address(address)
    except ValueError as e:
        return ClusterReport(address=str(address)[:80], summary=str(e), error="bad address")
    argv = child_argv("grpo_debug.probes.cluster", "--address", address, "--timeout", f"{timeout:g}")
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout + 120, shell=False)
    except subprocess.TimeoutExpired:
        return ClusterReport(address=address, summary=f"could not probe the Ray cluster at {address}: "
                             f"no report within {timeout + 120:g} s", error="timeout")
    except OSError as e:
        return ClusterReport(address=address, summary=f"could not start the cluster probe: {e}", error=str(e))
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    try:
        return ClusterReport.model_validate_json(lines[-1])
    except (IndexError, ValueError):
        tail = (p.stderr or p.stdout).strip().splitlines()[-1:] or ["no output"]
        return ClusterReport(address=address, summary=f"could not probe the Ray cluster at {address}: "
                             f"the probe exited {p.returncode} ({tail[0][:300]})", error=f"exit {p.returncode}")


def _probe_in_this_process(address: str, timeout: float) -> ClusterReport:
    """The child side of :func:`probe_cluster`: ``ray.init`` here, one task per node. Never raises."""
    try:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
    except ImportError:
        return ClusterReport(address=address, summary="ray is not installed here; pip install ray to probe a cluster",
                             error="ray not installed")
    if address not in ("auto", "local") and not address.startswith("ray://"):
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host or "127.0.0.1", int(port or 6379)), timeout=3):
                pass
        except (OSError, ValueError) as e:
            return ClusterReport(address=address, summary=f"could not probe the Ray cluster at {address}: "
                                 f"nothing answers there ({e}); give the head's GCS address, e.g. 10.0.0.5:6379",
                                 error=f"{type(e).__name__}: {e}")
    started = False
    try:
        if not ray.is_initialized():
            ray.init(address=address, log_to_driver=False, logging_level="ERROR", include_dashboard=False)
            started = True
        alive = [n for n in ray.nodes() if n.get("Alive")]
        task = ray.remote(num_cpus=0)(_node_task)
        refs, reports = [], []
        for n in alive:
            nid = n["NodeID"]
            reports.append(NodeReport(node_id=nid[:12], ip=n.get("NodeManagerAddress")))
            refs.append(task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=nid, soft=False)).remote())
        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        for rep, ref in zip(reports, refs):
            if ref not in ready:
                rep.error = f"no answer within {timeout:g} s"
                ray.cancel(ref, force=True)
                continue
            try:
                res = json.loads(ray.get(ref))
                rep.hostname, rep.facts = res["hostname"], res["facts"]
            except Exception as e:  # noqa: BLE001 - one node's failure is reported, not raised
                rep.error = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        diffs = compare_nodes(reports)
        failed = [r for r in reports if r.error]
        summary = (f"{len(reports)} node(s) probed, {len(failed)} failed; "
                   + (f"{len(diffs)} fact(s) differ across nodes: " + ", ".join(d.fact for d in diffs[:6])
                      if diffs else "no difference in versions, driver, limits or NCCL settings"))
        return ClusterReport(address=address, nodes=reports, differences=diffs, summary=summary)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - e.g. no cluster at that address (ray may sys.exit)
        return ClusterReport(address=address, summary=f"could not probe the Ray cluster at {address}: {e}",
                             error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
    finally:
        if started:
            try:
                ray.shutdown()
            except Exception:  # noqa: BLE001
                pass


def main(argv: list[str] | None = None) -> int:
    """``python -m grpo_debug.probes.cluster --address A --timeout S``: print one ClusterReport as JSON."""
    ap = argparse.ArgumentParser(prog="python -m grpo_debug.probes.cluster")
    ap.add_argument("--address", required=True)
    ap.add_argument("--timeout", type=float, default=120.0)
    args = ap.parse_args(argv)
    rep = _probe_in_this_process(args.address, args.timeout)
    sys.stdout.write("\n" + rep.model_dump_json() + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
