#!/usr/bin/env python3
"""Writes shardps' Kubernetes manifests (deploy/k8s/*.yaml) from the sizes set below.

    python3 deploy/k8s/generate.py            # rewrite the manifests after editing SIZES
    python3 deploy/k8s/generate.py --check    # exit 1 naming each manifest that differs
    python3 deploy/k8s/generate.py --namespace team-a --out DIR   # certificates for team-a
    python3 deploy/k8s/generate.py --tls off --out DIR   # no cert-manager: plaintext, --insecure

With TLS on (the default) tls.yaml holds cert-manager's objects: a self-signed bootstrap Issuer,
the cluster's CA Certificate, an Issuer signing with that CA, and one Certificate per role
(chief, ps, worker, evaluator, and admin for shardctl) whose Secret every pod of the role mounts
(no subPath, so a renewed certificate reaches the running pod) and names to its daemon with
--tls_cert_file/--tls_key_file/--tls_ca_file and --tls_client_auth. A certificate names the DNS
names of the role's pods, which include the namespace (SIZES["namespace"], or --namespace):
apply the manifests in that namespace. Kubernetes' gRPC probes cannot speak TLS: every daemon
answers them on a plaintext health-only port (--health_port, SIZES["health_port"]).

Why a generator and not kustomize: the task counts appear in several places that must agree
(each StatefulSet's or Job's replicas and every pod's SHARDPS_NUM_* variables, from which
deploy/k8s/entrypoint.sh writes TF_CONFIG), the ConfigMap must hold deploy/jobs/fashion_mlp.json
itself (plus a checkpoint dir on the volume), and the JobSet and TFJob forms reuse the same pod
settings. A kustomize overlay would need replacements for the counts and could not be rendered
here (no kustomize or kubectl offline), so the files a user applies would not be the files the
tests validate. This script needs Python 3's standard library only; its output is committed,
plain YAML for `kubectl apply -f`, and tests/k8s_manifests_test checks that it is up to date.
"""

import json
import os
import re
import sys

# --- Everything a deployment sizes, in one place. -------------------------------------------
SIZES = {
    # deploy/image/build.sh's images: this one (no CUDA) for every pod but GPU workers, which
    # run the same name with "-gpu" (it adds the CUDA plugin and libraries).
    "image": "shardps:latest",
    "num_ps": 2,
    "num_workers": 2,
    "evaluator": True,
    "port": 2222,
    # Every daemon's plaintext health-only port (--health_port), which the probes call.
    "health_port": 8080,
    # Every daemon's Prometheus /metrics (--metrics_port), with the daemon's TLS.
    "metrics_port": 9100,
    # The namespace the certificates' DNS names are for (TLS on): apply the manifests there.
    "namespace": "default",
    # requests and limits per role (the CPU worker variant uses "worker_cpu").
    "resources": {
        "chief": {"cpu": ("500m", "1"), "memory": ("512Mi", "1Gi")},
        "ps": {"cpu": ("1", "2"), "memory": ("2Gi", "4Gi")},
        "worker": {"cpu": ("2", "4"), "memory": ("2Gi", "4Gi"), "nvidia.com/gpu": 1},
        "worker_cpu": {"cpu": ("2", "4"), "memory": ("2Gi", "4Gi")},
        "evaluator": {"cpu": ("1", "2"), "memory": ("1Gi", "2Gi")},
        "submit": {"cpu": ("100m", "500m"), "memory": ("64Mi", "256Mi")},
    },
    "checkpoint_volume": "10Gi",
}
NAME = "shardps"          # StatefulSet pods are shardps-<role>-<ordinal> (entrypoint.sh)
JOBSET_NAME = "shardps-job"
TFJOB_NAME = "shardps-tf"
CKPT_MOUNT = "/ckpt"
JOBS_MOUNT = "/etc/shardps/jobs"
JOB_FILE = "fashion_mlp.json"
CKPT_DIR = CKPT_MOUNT + "/fashion-mlp"
METRICS_FILE = CKPT_MOUNT + "/evaluator_metrics.jsonl"
BIN = "/usr/local/bin"
ENTRYPOINT = BIN + "/shardps-entrypoint"
# The chief's SIGTERM checkpoint waits up to --interrupt_timeout_s (60 s); a ps writes its
# shards of that checkpoint meanwhile. 90 s leaves the checkpoint time to commit.
GRACE_S = 90
ROLES = ("chief", "ps", "worker", "evaluator")
# Where each pod mounts its role's Secret (tls.crt, tls.key, ca.crt; cert-manager's keys).
TLS_MOUNT = "/etc/shardps/tls"
# Certificates: the CA's lifetime, and the leaves' (renewed a third of the way before the end).
CA_DURATION = "87600h"     # 10 years: see docs/security.md#kubernetes on rotating the CA
CERT_DURATION = "2160h"    # 90 days
CERT_RENEW_BEFORE = "720h"
# The generator's options (main() sets them): TLS on or off, the certificates' namespace.
OPTIONS = {"tls": True}

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


class N(str):
    """A mapping key with a comment written above it."""

    def __new__(cls, key, comment):
        obj = super().__new__(cls, key)
        obj.comment = comment
        return obj


# --- A small YAML writer (block style; strings quoted as JSON where plain would be unsafe). ----
_PLAIN = re.compile(r"^[A-Za-z/][A-Za-z0-9_./:=@-]*( [A-Za-z0-9_./:=@()-]+)*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if _PLAIN.match(value) and value.lower() not in _RESERVED and ": " not in value:
        return value
    return json.dumps(value)


def _comment(key, pad):
    text = getattr(key, "comment", "")
    return "".join(f"{pad}# {line}\n" if line else f"{pad}#\n" for line in text.split("\n")) \
        if text else ""


def _emit(value, indent):
    pad = " " * indent
    out = ""
    if isinstance(value, dict):
        for key, item in value.items():
            out += _comment(key, pad)
            if isinstance(item, str) and "\n" in item:
                out += f"{pad}{key}: |\n"
                out += "".join(f"{pad}  {line}\n" for line in item.rstrip("\n").split("\n"))
            elif isinstance(item, (dict, list)) and item:
                out += f"{pad}{key}:\n" + _emit(item, indent + 2 if isinstance(item, dict) else indent)
            elif isinstance(item, (dict, list)):
                out += f"{pad}{key}: {'{}' if isinstance(item, dict) else '[]'}\n"
            else:
                out += f"{pad}{key}: {_scalar(item)}\n"
    else:  # a list
        for item in value:
            if isinstance(item, dict) and item:
                body = _emit(item, indent + 2)
                out += f"{pad}- " + body[indent + 2:]
            elif isinstance(item, list) and item:
                out += f"{pad}-\n" + _emit(item, indent + 2)
            else:
                out += f"{pad}- {_scalar(item)}\n"
    return out


def render(documents, header):
    text = "".join(f"# {line}\n" if line else "#\n" for line in header.split("\n"))
    for comment, doc in documents:
        text += "---\n" + "".join(f"# {line}\n" for line in comment.split("\n")) + _emit(doc, 0)
    return text


# --- Pieces shared by every form. -----------------------------------------------------------
def labels(role, instance=NAME):
    """Every object's labels. `instance` keeps the forms apart in one namespace: the
    long-lived cluster's Services select its StatefulSets' pods only, not a JobSet's."""
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/instance": instance,
            "app.kubernetes.io/component": role}


def resources(kind):
    spec = SIZES["resources"][kind]
    requests, limits = {}, {}
    for name, value in spec.items():
        if isinstance(value, tuple):
            requests[name], limits[name] = value
        else:  # an extended resource (a GPU): a limit only, which is also its request
            limits[name] = value
    return {"requests": requests, "limits": limits}


def probes(script=False):
    """gRPC probes on the plaintext health port; a user's script (no --health_port) is
    probed on its own port: gRPC without TLS, a TCP connect with it."""
    if script and OPTIONS["tls"]:
        check = {"tcpSocket": {"port": "grpc"}}
        note = ("A TCP connect to the script's port: kubelet's gRPC probes cannot speak TLS,\n"
                "and shardps.Worker has no plaintext health port (--health_port) yet.")
    elif script:
        check = {"grpc": {"port": SIZES["port"]}}
        note = "grpc.health.v1 on the script's port: SERVING once it serves."
    else:
        check = {"grpc": {"port": SIZES["health_port"]}}
        note = ("grpc.health.v1 on the daemon's plaintext health-only port (--health_port):\n"
                "kubelet's gRPC probes cannot speak TLS. SERVING once the daemon serves,\n"
                "NOT_SERVING while it drains.")
    return {
        N("readinessProbe", note): {**check, "periodSeconds": 5, "failureThreshold": 3},
        N("livenessProbe", "A daemon that has not answered its health check for a minute "
          "is restarted."): {
            **check, "initialDelaySeconds": 10, "periodSeconds": 10, "timeoutSeconds": 5,
            "failureThreshold": 6},
    }


def tls_args():
    """The TLS flags of every daemon and of shardctl: the role's mounted Secret, mutual TLS;
    with --tls off, --insecure (plaintext beyond loopback, said explicitly)."""
    if not OPTIONS["tls"]:
        return ["--insecure"]
    return [f"--tls_cert_file={TLS_MOUNT}/tls.crt", f"--tls_key_file={TLS_MOUNT}/tls.key",
            f"--tls_ca_file={TLS_MOUNT}/ca.crt", "--tls_client_auth"]


def tls_env():
    """The same for a Python script (shardps reads SHARDPS_TLS_*: docs/python.md)."""
    if not OPTIONS["tls"]:
        return [{"name": "SHARDPS_INSECURE", "value": "1"}]
    return [{"name": "SHARDPS_TLS_CERT_FILE", "value": f"{TLS_MOUNT}/tls.crt"},
            {"name": "SHARDPS_TLS_KEY_FILE", "value": f"{TLS_MOUNT}/tls.key"},
            {"name": "SHARDPS_TLS_CA_FILE", "value": f"{TLS_MOUNT}/ca.crt"},
            {"name": "SHARDPS_TLS_CLIENT_AUTH", "value": "true"}]


def tls_mount():
    return {"name": "tls", "mountPath": TLS_MOUNT, "readOnly": True}


def tls_volume(role):
    return {"name": "tls", N("secret", f"{NAME}-{role}'s certificate (tls.yaml): mounted whole, "
                                 "no subPath, so that\ncert-manager's renewal reaches the "
                                 "running pod (the daemon reads the files\nagain every "
                                 "--tls_refresh_s)."):
            {"secretName": f"{NAME}-{role}-tls"}}


def cluster_env(role_env=None, jobset=False):
    env = []
    if role_env:
        env.append({"name": "SHARDPS_ROLE", "value": role_env})
    env += [
        {"name": "SHARDPS_NUM_PS", "value": str(SIZES["num_ps"])},
        {"name": "SHARDPS_NUM_WORKERS", "value": str(SIZES["num_workers"])},
        {"name": "SHARDPS_EVALUATOR", "value": "1" if SIZES["evaluator"] else "0"},
        {"name": "POD_NAMESPACE",
         "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    ]
    if jobset:
        env.append({"name": "JOBSET_NAME", "valueFrom": {"fieldRef": {
            "fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}}})
    return env


def image(kind):
    """The CPU image, or for a container that asks for a GPU the same name with "-gpu"."""
    gpu = "nvidia.com/gpu" in SIZES["resources"].get(kind, {})
    return SIZES["image"] + ("-gpu" if gpu else "")


def container(role, args, kind=None, env=None, name="shardps", serves=True, port_name="grpc",
              script=False):
    """A daemon's container. `serves`: it listens at its TF_CONFIG address (not TFJob's
    evaluator, which TF_CONFIG leaves out). `script`: a user's Python script runs instead
    (workers-python.yaml): its args are its own, so TLS comes by the environment."""
    kind = kind or role
    env = env if env is not None else cluster_env()
    if script:
        # shardps.Worker / Evaluator serve /metrics like the daemons (docs/python.md).
        env = env + tls_env() + [{"name": "SHARDPS_METRICS_PORT",
                                  "value": str(SIZES["metrics_port"])}]
    else:
        args = args + tls_args() + [f"--health_port={SIZES['health_port']}",
                                    f"--metrics_port={SIZES['metrics_port']}"]
        if role != "worker":  # its files stay on the checkpoint volume (docs/security.md)
            args = args + [f"--data_root={CKPT_MOUNT}"]
    c = {
        "name": name,
        "image": image(kind),
        N("imagePullPolicy", "Built by deploy/image/build.sh and loaded into the nodes (kind "
          "load, a local registry);\n:latest would otherwise mean Always."): "IfNotPresent",
        "command": [ENTRYPOINT],
        "args": args,
        "env": env,
        "resources": resources(kind),
    }
    ports = []
    if serves:
        ports.append({"name": port_name, "containerPort": SIZES["port"], "protocol": "TCP"})
    if not script:
        ports.append({"name": "health", "containerPort": SIZES["health_port"], "protocol": "TCP"})
    ports.append({"name": "metrics", "containerPort": SIZES["metrics_port"], "protocol": "TCP"})
    c["ports"] = ports
    c.update(probes(script))
    mounts = []
    if role != "worker":  # workers keep no files: they pull from the ps and read the data set
        mounts.append({"name": "checkpoints", "mountPath": CKPT_MOUNT})
    if role == "chief":
        mounts.append({"name": "jobs", "mountPath": JOBS_MOUNT, "readOnly": True})
    if OPTIONS["tls"]:
        mounts.append(tls_mount())
    if mounts:
        c["volumeMounts"] = mounts
    return c


def volumes(role):
    v = []
    if role != "worker":
        v.append({"name": "checkpoints",
                  "persistentVolumeClaim": {"claimName": f"{NAME}-checkpoints"}})
    if role == "chief":
        v.append({"name": "jobs", "configMap": {"name": f"{NAME}-jobs"}})
    if OPTIONS["tls"]:
        v.append(tls_volume(role))
    return v


def pod_spec(role, cont, restart_policy=None):
    spec = {}
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    spec[N("enableServiceLinks", "No Docker-link variables: the entrypoint reads SHARDPS_* "
           "variables only, and a\nService named shardps-* would add SHARDPS_*_PORT ones.")] = False
    spec[N("terminationGracePeriodSeconds", "SIGTERM: the chief checkpoints the job "
           "(--interrupt_timeout_s, 60 s) and exits 5;\nthe ps write their shards of that "
           "checkpoint meanwhile.")] = GRACE_S
    spec["containers"] = [cont]
    vols = volumes(role)
    if vols:
        spec["volumes"] = vols
    return spec


EVALUATOR_NOTE = ("The evaluator calls the chief and the ps; at its TF_CONFIG address it answers "
                  "only gRPC's\nhealth check, and nothing else connects to it.")

# docs/exit-codes.md's table as a Job's podFailurePolicy: 2 (bad configuration), 4 (job
# failed or cancelled, a job cancelled with its final checkpoint never committed included),
# 6 (orphaned) fail the Job; 5 (SIGTERM: eviction, drain, preemption) and a disruption are
# not counted against backoffLimit; 1 and the rest are retried and counted. A final
# checkpoint that fails (a full volume) takes no exit code: the chief keeps the job running,
# every pod up, and retries it until it commits or the job is cancelled.
# JobSet's API requires onPodConditions[].status (a core Job defaults it to "True").
def pod_failure_policy(container_name="shardps"):
    return {"rules": [
        {"action": "FailJob", "onExitCodes": {"containerName": container_name, "operator": "In",
                                              "values": [2, 4, 6]}},
        {"action": "Ignore", "onExitCodes": {"containerName": container_name, "operator": "In",
                                             "values": [5]}},
        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                  "status": "True"}]},
    ]}


def job_file_for_volume():
    with open(os.path.join(REPO, "deploy", "jobs", JOB_FILE)) as f:
        job = json.load(f)
    checkpoint = job.get("checkpoint", {})
    if isinstance(checkpoint, str):
        checkpoint = {}
    job["checkpoint"] = {"dir": CKPT_DIR, **{k: v for k, v in checkpoint.items() if k != "dir"}}
    return json.dumps(job, indent=2) + "\n"


# --- The files. -----------------------------------------------------------------------------
def common():
    pvc = {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"{NAME}-checkpoints", "labels": labels("checkpoints")},
        "spec": {
            N("accessModes", "The chief and every ps write one checkpoint together, from "
              "different nodes;\nthe evaluator reads it. The cluster's default StorageClass must "
              "offer ReadWriteMany\n(NFS, CephFS, Filestore, EFS, Azure Files); set "
              "storageClassName to one that does."): ["ReadWriteMany"],
            "resources": {"requests": {"storage": SIZES["checkpoint_volume"]}},
        },
    }
    cm = {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": f"{NAME}-jobs", "labels": labels("jobs")},
        "data": {JOB_FILE: job_file_for_volume()},
    }
    return [
        ("Checkpoints (docs/durability.md), shared by every form.", pvc),
        (f"deploy/jobs/{JOB_FILE} with its checkpoint dir on the volume ({CKPT_DIR}). The data "
         "set is in the image:\nDebian's dataset-fashion-mnist at "
         "/usr/share/datasets/fashion-mnist, the job file's default data_dir.", cm),
    ]


def service(role):
    spec = {
        N("clusterIP", "Headless: one DNS name per pod, "
          f"{NAME}-{role}-<i>.{NAME}-{role}.<namespace>.svc."): "None",
        N("publishNotReadyAddresses", "A pod's name resolves before it is ready: the chief "
          "reaches a ps that is starting,\nand tasks find each other while the cluster comes "
          "up."): True,
        "selector": labels(role),
        "ports": [{"name": "grpc", "port": SIZES["port"], "targetPort": "grpc",
                   "protocol": "TCP"}],
    }
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{NAME}-{role}", "labels": labels(role)}, "spec": spec}


def pod_meta(pod_labels):
    """A pod's template metadata: its labels and the scrape annotations that Prometheus'
    kubernetes_sd_configs relabelling reads (docs/observability.md); a user's script serves
    /metrics through shardps.Worker / Evaluator ($SHARDPS_METRICS_PORT)."""
    return {
        "labels": pod_labels,
        "annotations": {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": str(SIZES["metrics_port"]),
            "prometheus.io/path": "/metrics",
            "prometheus.io/scheme": "https" if OPTIONS["tls"] else "http",
        },
    }


def statefulset(role, replicas, args, kind=None, env=None, script=False):
    cont = container(role, args, kind=kind, env=env, script=script)
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": f"{NAME}-{role}", "labels": labels(role)},
        "spec": {
            "serviceName": f"{NAME}-{role}",
            "replicas": replicas,
            N("podManagementPolicy", "Start and replace pods at once, not one after another: "
              "no task waits for another to be\nready (the chief waits for the ps itself)."):
                "Parallel",
            "selector": {"matchLabels": labels(role)},
            "template": {"metadata": pod_meta(labels(role)), "spec": pod_spec(role, cont)},
        },
    }


def cluster():
    docs = []
    for role in ROLES:
        if role == "worker" or (role == "evaluator" and not SIZES["evaluator"]):
            continue
        note = EVALUATOR_NOTE if role == "evaluator" else \
            "Headless Service: the pods' DNS names in TF_CONFIG (deploy/k8s/entrypoint.sh)."
        docs.append((note, service(role)))
    docs.append(("Workers' Service; their StatefulSet is in workers-gpu.yaml or "
                 "workers-cpu.yaml.", service("worker")))
    docs.append(("The chief, long-lived: it serves jobs from shardctl one after another "
                 "(submit-job.yaml).\nA StatefulSet restarts even an exit 0, hence "
                 "--long_lived on every daemon (docs/exit-codes.md).",
                 statefulset("chief", 1, ["--long_lived"])))
    docs.append(("The ps; a restarted ps is restored from the newest checkpoint by the chief.",
                 statefulset("ps", SIZES["num_ps"], ["--long_lived"])))
    if SIZES["evaluator"]:
        docs.append((EVALUATOR_NOTE + "\nps mode: it follows the chief's jobs; metrics on the "
                     "volume.", statefulset("evaluator", 1, [
                         "--long_lived", f"--metrics_file={METRICS_FILE}", "--backend=cpu"])))
    pdb = {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": f"{NAME}-ps", "labels": labels("ps")},
        "spec": {
            N("maxUnavailable", "A ps evicted mid-job rolls the job back to its newest "
              "checkpoint: no voluntary\neviction of a ps. To drain its node, `shardctl "
              "checkpoint` first, then delete the pod\n(kubectl delete pod): the steps after "
              "that checkpoint are all that is lost."): 0,
            "selector": {"matchLabels": labels("ps")},
        },
    }
    docs.append(("Drains and evictions wait for the ps.", pdb))
    return docs


def workers(gpu):
    if gpu:
        sts = statefulset("worker", SIZES["num_workers"], ["--long_lived", "--backend=gpu"])
        note = ("Workers on GPUs (CUDA + cuBLAS), one each. --backend=gpu: a worker without a "
                "GPU exits 1\nand says so, instead of training on its CPU unnoticed.")
    else:
        cpu_limit = SIZES["resources"]["worker_cpu"]["cpu"][1]
        sts = statefulset("worker", SIZES["num_workers"],
                          ["--long_lived", "--backend=cpu", f"--threads={cpu_limit}"],
                          kind="worker_cpu")
        note = ("Workers on CPUs (Eigen), as many compute threads as their CPU limit. Apply "
                "this or\nworkers-gpu.yaml: both are the StatefulSet shardps-worker.")
    return [(note, sts)]


def submit_job():
    cont = {
        "name": "shardps",
        "image": SIZES["image"],
        "imagePullPolicy": "IfNotPresent",
        "command": [BIN + "/shardctl"],
        N("args", "The chief by its Service's name; --watch keeps the Job running until the "
          "training job\nends, so the Job's status is the training job's."): [
            f"--chief={NAME}-chief:{SIZES['port']}", "submit", f"{JOBS_MOUNT}/{JOB_FILE}",
            "--watch"] + tls_args(),
        "resources": resources("submit"),
        "volumeMounts": [{"name": "jobs", "mountPath": JOBS_MOUNT, "readOnly": True}] +
                        ([tls_mount()] if OPTIONS["tls"] else []),
    }
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": f"{NAME}-submit-fashion-mlp", "labels": labels("submit")},
        "spec": {
            N("backoffLimit", "Exit 3 (the chief unreachable: still starting) and 1 are "
              "retried, with the Job's\nbackoff (10 s doubling)."): 8,
            N("podFailurePolicy", "shardctl's exit codes: 2 a bad job file, 4 the job failed "
              "or was cancelled."): {"rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": "shardps",
                                                      "operator": "In", "values": [2, 4]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget",
                                                          "status": "True"}]}]},
            "ttlSecondsAfterFinished": 86400,
            "template": {"metadata": {"labels": labels("submit")}, "spec": {
                "restartPolicy": "Never",
                "enableServiceLinks": False,
                "containers": [cont],
                "volumes": [{"name": "jobs", "configMap": {"name": f"{NAME}-jobs"}}] +
                           ([tls_volume("admin")] if OPTIONS["tls"] else []),
            }},
        },
    }
    return [("Submits the main job to the long-lived chief (apply after cluster.yaml). A "
             "chief that already\nholds the job's checkpoints resumes it "
             "(docs/jobs.md#resuming-and-watching).", job)]


BATCH_ARGS = {
    "chief": [f"--job={JOBS_MOUNT}/{JOB_FILE}"],
    "ps": [],
    "worker": [],
    "evaluator": [f"--metrics_file={METRICS_FILE}", "--backend=cpu"],
}


def jobset():
    replicated = []
    for role in ROLES:
        if role == "evaluator" and not SIZES["evaluator"]:
            continue
        count = {"chief": 1, "ps": SIZES["num_ps"], "worker": SIZES["num_workers"],
                 "evaluator": 1}[role]
        cont = container(role, BATCH_ARGS[role], env=cluster_env(role, jobset=True))
        spec = pod_spec(role, cont, restart_policy="Never")
        template = {"metadata": pod_meta(labels(role, JOBSET_NAME)), "spec": spec}
        replicated.append({
            "name": role,
            N("replicas", "One Job per role; its pods are <jobset>-<role>-0-<index>."): 1,
            "template": {"spec": {
                "completionMode": "Indexed",
                "completions": count,
                "parallelism": count,
                N("backoffLimit", "Failures (exit 1) across the role's pods before the Job "
                  "fails and the JobSet\nrestarts (failurePolicy)."): 6,
                "podFailurePolicy": pod_failure_policy(),
                "template": template,
            }},
        })
    js = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
        "metadata": {"name": JOBSET_NAME, "labels": labels("jobset", JOBSET_NAME)},
        "spec": {
            N("network", "Pods get hostnames <jobset>-<role>-0-<index> under a headless "
              "Service named after the\nJobSet; the entrypoint writes TF_CONFIG with them "
              "(JOBSET_NAME, SHARDPS_ROLE,\nJOB_COMPLETION_INDEX)."): {
                "enableDNSHostnames": True, "publishNotReadyAddresses": True},
            N("successPolicy", "Done when the chief is: it exits 0 once the job succeeded and "
              "it has shut the ps\nand workers down."): {
                "operator": "All", "targetReplicatedJobs": ["chief"]},
            N("failurePolicy", "A Job failed by its podFailurePolicy (exit 2, 4 or 6: "
              "restarting cannot help) fails\nthe JobSet; any other Job failure recreates all "
              "Jobs, and the chief resumes the job\nfrom its checkpoint dir, up to "
              "maxRestarts times."): {
                "maxRestarts": 3,
                "rules": [{"name": "FailOnPermanentExit", "action": "FailJobSet",
                           "onJobFailureReasons": ["PodFailurePolicy"]}],
            },
            "replicatedJobs": replicated,
        },
    }
    return [("The batch form: one training job, run to its end (JobSet, jobset.x-k8s.io). "
             "Needs common.yaml.", js)]


def tfjob():
    specs = {}
    for role, rtype in (("chief", "Chief"), ("ps", "PS"), ("worker", "Worker"),
                        ("evaluator", "Evaluator")):
        if role == "evaluator" and not SIZES["evaluator"]:
            continue
        count = {"chief": 1, "ps": SIZES["num_ps"], "worker": SIZES["num_workers"],
                 "evaluator": 1}[role]
        args = BATCH_ARGS[role]
        if role == "evaluator":
            args = [f"--checkpoint_dir={CKPT_DIR}", f"--metrics_file={METRICS_FILE}",
                    "--backend=cpu"]
        # TFJob writes TF_CONFIG; the entrypoint keeps it and runs the daemon of its task.type.
        # The evaluator, left out of its cluster, listens only on the health port.
        cont = container(role, args, env=[], name="tensorflow", port_name="tfjob-port",
                         serves=role != "evaluator")
        del cont["env"]
        spec = pod_spec(role, cont)
        key = rtype
        if role == "evaluator":
            key = N(rtype, "TFJob leaves the evaluator out of TF_CONFIG's cluster, so the "
                    "chief cannot see it there\n(chief --evaluator=yes would make it wait for "
                    "the final evaluation all the same).\nHere it runs in sidecar mode instead: "
                    "it evaluates each checkpoint on the volume\nand exits 0 after the final "
                    "one, with or without the chief (docs/evaluator.md),\nso the job's end "
                    "never waits on it; cleanPodPolicy None lets it finish.")
        specs[key] = {
            "replicas": count,
            N("restartPolicy", "Not ExitCode: it would take exit 5 (SIGTERM) as permanent. "
              "OnFailure restarts it.") if role == "chief" else "restartPolicy": "OnFailure",
            "template": {"metadata": pod_meta(labels(role, TFJOB_NAME)), "spec": spec},
        }
    tj = {
        "apiVersion": "kubeflow.org/v1", "kind": "TFJob",
        "metadata": {"name": TFJOB_NAME, "labels": labels("tfjob", TFJOB_NAME)},
        "spec": {
            "runPolicy": {
                N("cleanPodPolicy", "None: ps and workers exit 0 by themselves when the chief "
                  "ends the job, and the\nsidecar evaluator finishes its final checkpoint "
                  "after the chief is done."): "None",
                N("backoffLimit", "Restarts across all replicas before the TFJob fails."): 6,
            },
            N("successPolicy", "The default: the TFJob succeeds when the chief does."): "",
            "tfReplicaSpecs": specs,
        },
    }
    return [("The batch form under Kubeflow's Training Operator (TFJob, kubeflow.org/v1). "
             "Needs common.yaml.", tj)]


PYTHON_IMAGE = "shardps-python:latest"
SCRIPT_MOUNT = "/etc/shardps/script"
SCRIPT_CONFIGMAP = f"{NAME}-script"


def python_workers():
    """The workers and the evaluator of a job whose model is the user's Python script."""
    docs = []
    for role, replicas in (("worker", SIZES["num_workers"]), ("evaluator", 1)):
        if role == "evaluator" and not SIZES["evaluator"]:
            continue
        sts = statefulset(role, replicas, [], kind="worker_cpu" if role == "worker" else None,
                          env=cluster_env() + [{"name": "SHARDPS_PYTHON_SCRIPT",
                                                "value": f"{SCRIPT_MOUNT}/train.py"}],
                          script=True)
        pod = sts["spec"]["template"]["spec"]
        (cont,) = pod["containers"]
        cont["image"] = PYTHON_IMAGE
        cont["volumeMounts"] = cont.get("volumeMounts", []) + [
            {"name": "script", "mountPath": SCRIPT_MOUNT, "readOnly": True}]
        pod["volumes"] = pod.get("volumes", []) + [
            {"name": "script", "configMap": {"name": SCRIPT_CONFIGMAP}}]
        docs.append((
            f"The workers run the user's script train.py from the ConfigMap {SCRIPT_CONFIGMAP}\n"
            f"(kubectl create configmap {SCRIPT_CONFIGMAP} --from-file=train.py) with the "
            f"Python of\n{PYTHON_IMAGE}: shardps.Worker / shardps.Evaluator by TF_CONFIG's "
            "task type (docs/python.md).\nThat image is shardps:latest plus Python 3.11, numpy, "
            "PyTorch if the script needs it and\nshardps' wheel; deploy/image/build.sh does not "
            "build it yet. A script exits 0 when its job\nends; the StatefulSet starts it again "
            "for the next job." if role == "worker" else
            "The evaluator: the same script, as TF_CONFIG's evaluator task. Replaces "
            "cluster.yaml's\nevaluator StatefulSet (the same name): apply this file after it.",
            sts))
    return docs


def dns_names(role):
    """Every name a role's pods are dialled by, in every form: the StatefulSets' pods under their
    headless Service (a wildcard) and the Service itself (shardctl's --chief), the JobSet's
    pods, the TFJob's (the training operator's Service per pod)."""
    ns = SIZES["namespace"]
    count = {"chief": 1, "ps": SIZES["num_ps"], "worker": SIZES["num_workers"],
             "evaluator": 1}[role]
    names = [f"{NAME}-{role}", f"{NAME}-{role}.{ns}.svc", f"*.{NAME}-{role}.{ns}.svc"]
    names += [f"{JOBSET_NAME}-{role}-0-{i}.{JOBSET_NAME}.{ns}.svc" for i in range(count)]
    if role != "evaluator":  # TFJob leaves the evaluator out of its cluster
        names += [f"{TFJOB_NAME}-{role}-{i}.{ns}.svc" for i in range(count)]
    return names


def tls():
    issuer_ref = lambda name: {"name": name, "kind": "Issuer", "group": "cert-manager.io"}
    docs = [
        ("The bootstrap: an Issuer that self-signs, for the CA certificate only.", {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": f"{NAME}-selfsigned", "labels": labels("tls")},
            "spec": {"selfSigned": {}},
        }),
        ("The cluster's CA: every daemon trusts it (ca.crt in each Secret) and nothing else.", {
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": f"{NAME}-ca", "labels": labels("tls")},
            "spec": {
                "isCA": True,
                "commonName": f"{NAME}-ca",
                "secretName": f"{NAME}-ca",
                N("duration", "Long-lived: a new CA is trusted by a pod only once its own "
                  "certificate is renewed,\nso rotating it is a planned step "
                  "(docs/security.md#kubernetes)."): CA_DURATION,
                "privateKey": {"algorithm": "ECDSA", "size": 256},
                "issuerRef": issuer_ref(f"{NAME}-selfsigned"),
            },
        }),
        ("Signs the roles' certificates with the CA.", {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": f"{NAME}-ca", "labels": labels("tls")},
            "spec": {"ca": {"secretName": f"{NAME}-ca"}},
        }),
    ]
    roles = [r for r in ROLES if r != "evaluator" or SIZES["evaluator"]] + ["admin"]
    for role in roles:
        spec = {"secretName": f"{NAME}-{role}-tls"}
        if role != "admin":
            spec[N("dnsNames", "The names its pods are dialled by, which a client checks "
                   f"(namespace {SIZES['namespace']}).")] = dns_names(role)
        spec[N("uris", "The role, which a server reads from its client's certificate.")] = [
            f"spiffe://shardps/{role}"]
        spec["duration"] = CERT_DURATION
        spec["renewBefore"] = CERT_RENEW_BEFORE
        spec[N("privateKey", "A new key at each renewal.")] = {
            "algorithm": "ECDSA", "size": 256, "rotationPolicy": "Always"}
        spec["usages"] = ["digital signature", "client auth"] if role == "admin" else \
            ["digital signature", "server auth", "client auth"]
        spec["issuerRef"] = issuer_ref(f"{NAME}-ca")
        note = ("shardctl's certificate (the submit Job's): a client only, role admin." if
                role == "admin" else
                f"The {role} pods' certificate, server and client, in every form.")
        docs.append((note, {
            "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": f"{NAME}-{role}", "labels": labels("tls")},
            "spec": spec,
        }))
    return docs


FILES = {
    "tls.yaml": tls,
    "common.yaml": common,
    "cluster.yaml": cluster,
    "workers-gpu.yaml": lambda: workers(True),
    "workers-cpu.yaml": lambda: workers(False),
    "workers-python.yaml": python_workers,
    "submit-job.yaml": submit_job,
    "jobset.yaml": jobset,
    "tfjob.yaml": tfjob,
}

HEADER = ("Generated by deploy/k8s/generate.py from its SIZES ({num_ps} ps, {num_workers} "
          "workers, evaluator: {evaluator},\nimage {image}, TLS {tls}{namespace_note}); edit "
          "SIZES there and\nrun it again rather than editing this file.")

USAGE = "usage: generate.py [--check] [--tls on|off] [--namespace NS] [--out DIR]"
_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def parse_args(argv):
    """{"check", "tls", "namespace", "out"} from the command line; exits 2 naming a bad one."""
    opts = {"check": False, "tls": "on", "namespace": SIZES["namespace"], "out": HERE}
    args = list(argv[1:])
    while args:
        arg = args.pop(0)
        if arg == "--check":
            opts["check"] = True
            continue
        key, eq, value = arg.partition("=")
        if key not in ("--tls", "--namespace", "--out"):
            print(f"generate.py: unknown argument {arg} ({USAGE})", file=sys.stderr)
            sys.exit(2)
        if not eq:
            if not args:
                print(f"generate.py: {key} needs a value ({USAGE})", file=sys.stderr)
                sys.exit(2)
            value = args.pop(0)
        opts[key[2:]] = value
    if opts["tls"] not in ("on", "off"):
        print(f"generate.py: --tls must be on or off, got {opts['tls']!r}", file=sys.stderr)
        sys.exit(2)
    if not _LABEL.match(opts["namespace"]):
        print(f"generate.py: --namespace {opts['namespace']!r} is not a namespace (a DNS label)",
              file=sys.stderr)
        sys.exit(2)
    return opts


def main(argv):
    opts = parse_args(argv)
    OPTIONS["tls"] = opts["tls"] == "on"
    SIZES["namespace"] = opts["namespace"]
    header = HEADER.format(
        **SIZES, tls=opts["tls"],
        namespace_note=f", certificates for namespace {SIZES['namespace']}" if OPTIONS["tls"]
        else "")
    os.makedirs(opts["out"], exist_ok=True)
    stale = []
    for name, make in FILES.items():
        path = os.path.join(opts["out"], name)
        if name == "tls.yaml" and not OPTIONS["tls"]:
            if not opts["check"] and os.path.exists(path):
                os.remove(path)  # none: a tls.yaml left from before would not match the rest
            continue
        text = render(make(), header)
        if opts["check"]:
            try:
                with open(path) as f:
                    if f.read() != text:
                        stale.append(name)
            except FileNotFoundError:
                stale.append(name)
        else:
            with open(path, "w") as f:
                f.write(text)
    if stale:
        print("generate.py: out of date (run python3 deploy/k8s/generate.py): "
              + ", ".join(os.path.join(opts["out"], n) for n in stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
